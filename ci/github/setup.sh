#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Starts the daemon for a GitHub Actions job from the action's inputs and
# puts its settings in the job's environment ($GITHUB_ENV), so every later
# `run:` step is confined when the job says
#   defaults: {run: {shell: /usr/local/bin/sluice-shell {0}}}
set -euo pipefail
prefix=${SLUICE_CI_PREFIX:-/usr/local}
export SLUICE=${SLUICE:-$prefix/bin/sluice}
export SLUICE_CI_DIR=${SLUICE_CI_DIR:-${RUNNER_TEMP:?}/sluice}
export SLUICE_CI_MODE=${INPUT_MODE:-block}
export SLUICE_CI_ALLOWLIST=${INPUT_ALLOWLIST:-}
export SLUICE_CI_LEARN=${INPUT_LEARN:-false}
export SLUICE_CI_CONFINE=${INPUT_CONFINE:-steps}
if [[ -n ${INPUT_RUNNER_ENDPOINTS:-} ]]; then export SLUICE_CI_RUNNER_ENDPOINTS=$INPUT_RUNNER_ENDPOINTS; fi
env=$("$prefix/bin/sluice-ci" setup)
printf '%s\nSLUICE=%s\n' "$env" "$SLUICE" >>"${GITHUB_ENV:?}"
