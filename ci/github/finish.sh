#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Ends a confined GitHub Actions job: writes the job's summary (what was
# denied or would have been, by step, process and destination, and the
# suggested allowlist) to $GITHUB_STEP_SUMMARY, the learned allowlist when
# asked, and stops the daemon. The files are in $SLUICE_CI_DIR for the
# artifact upload that follows.
set -euo pipefail
prefix=${SLUICE_CI_PREFIX:-/usr/local}
[[ -n ${SLUICE_CI_DIR:-} ]] || { echo "finish.sh: no SLUICE_CI_DIR: did the sluice setup step run?" >&2; exit 1; }
"$prefix/bin/sluice-ci" finish >>"${GITHUB_STEP_SUMMARY:?}"
