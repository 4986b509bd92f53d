// SPDX-License-Identifier: Apache-2.0

// Package ci holds sluice's CI integrations and their end-to-end test: the
// runner-neutral script sluice-ci (setup, a confined shell, a summary,
// finish), the GitHub Actions scripts behind action.yml (ci/github) and the
// GitLab CI template (ci/gitlab). The logic lives in scripts so that the
// test here runs the very files a runner runs, as root against the real
// kernel, confining sample jobs in a namespace world (tests/world).
package ci
