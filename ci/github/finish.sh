#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Ends a confined GitHub Actions job: has root stop the daemon, remove the
# job's sessions and write the job's summary (what was denied or would
# have been, by step, process and destination, and the suggested
# allowlist) and, when asked, the learned allowlist, then appends the
# summary to $GITHUB_STEP_SUMMARY. The files are in $SLUICE_CI_DIR for the
# artifact upload that follows.
#
# What runs as root is the root-owned sluice-ci that install.sh put in the
# prefix, with a clean environment (sluice-ci finish calls sudo with env
# -i and absolute paths, and takes its settings from the root-owned file
# that setup wrote): nothing a confined step wrote to $GITHUB_ENV chooses
# it (sluice-shell drops SLUICE*, BASH_ENV and the like from it anyway).
set -euo pipefail
prefix=${SLUICE_CI_PREFIX:-/usr/local}
"$prefix/bin/sluice-ci" finish >>"${GITHUB_STEP_SUMMARY:?}"
