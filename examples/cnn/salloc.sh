#!/bin/bash
# The CNN example in an interactive allocation, to try things before a batch job:
#     salloc -N2 --ntasks-per-node=2 --primus=pytorch --time=30
#     module load primus
#     ./salloc.sh                  # run from the allocation's shell
# primus-launch starts the allocation's 4 ranks as one step and prints their output with the
# rank in front. Ctrl-C stops them after a checkpoint; running it again resumes there.
set -euo pipefail
if [[ -z ${SLURM_JOB_ID:-} ]]; then
  echo "salloc.sh: run it inside salloc (see the comment at its top)" >&2
  exit 2
fi
cd "$(dirname "$0")"
[[ -d data ]] || python3 make_data.py data
exec primus-launch --label --primus-job-dir=cnn-interactive --primus-data='data/*.tfrecord' \
  -- python3 train.py
