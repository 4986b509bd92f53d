// SPDX-License-Identifier: Apache-2.0

// Package deploy holds no code: it is the module of sluice's Kubernetes
// deployment files (kubernetes/, plain manifests; helm/sluice, the chart)
// and of their tests, kept apart so that the product's module carries no
// Kubernetes or Helm dependencies.
//
// The tests decode every manifest, and every object the chart renders,
// strictly into the Kubernetes API types (a misspelt field fails, as the
// API server would refuse it), parse the example policies with sluice's
// own podpolicy parser, check that the DaemonSet passes only flags
// `sluice node` has, lint the chart and hold its rendering with the
// default values to the plain DaemonSet, so the two cannot drift.
package deploy
