#!/usr/bin/env bash
# Part 2 of the GPU work: the measurements a session lent a GPU makes, one step per device call.
#
#   bash benchmarks/gpu.sh STEP OUT
#
# Each STEP fits one 10-minute call of the `device` tool. It writes records only (no weights:
# files over 16 MiB cannot come back) into the device's copy of results/, so that their commands
# name results/, and copies them to OUT (a folder as a .tar.gz); commit them under results/.
# The device machine is bare and offline. Before the first call, on this machine, in the
# repository's root, gather what the calls carry into .gpu/ (ignored by git):
#
#   echo /.gpu/ >> .git/info/exclude
#   mkdir -p .gpu/whl .gpu/multi30k && cp ../shared/data/multi30k/* .gpu/multi30k/
#   cp ../shared/anchors/the_annotated_transformer.py .gpu/
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux2014_x86_64 -d .gpu/whl pooch==1.9.0 platformdirs
#
# and give each call `carry: [".gpu"]` and the command `bash benchmarks/gpu.sh STEP $OUT`.
# The device's own Python already has torch, tqdm, sacrebleu, tokenizers, safetensors and numpy.
#
# Steps, in order (issue 34, part 2):
#   bench     benchmarks/train.py on the base preset in bf16 (ours, every fast path, compile,
#             nn.Transformer, the 2022 code) and the WMT-shaped step (wmt_throughput.py): 8 min
#   ddp       one process under torchrun with NCCL against two plain runs (ddp_check.py): 3 min
#   base      the base preset trained on Multi30k, its last 5 checkpoints averaged, every split
#             scored (beam 4 and greedy), and benchmarks/decoding.py on it; $SECONDS_CAP caps
#             training (default 330 s: SIGTERM, and the trainer saves a checkpoint and stops);
#             arguments after OUT go to `train` (e.g. --epochs 20); DECODING=0 leaves out the
#             decoding benchmark. 40 epochs (5,200 steps) take 6.5 min on an H100
#
#   wheels    (before `chapters`) installs the wheels of the folder named after OUT into
#             /tmp/site-chapters, which stays while the machine is warm: see "The chapters" below
#   chapters  the chapters under the full profile with tools/run_chapters.py (plain `exec`, no
#             Jupyter, each chapter in a process of its own), each chapter's time added to
#             results/chapters-full-cuda.json; arguments after OUT name the chapters (default:
#             every chapter but two that need what the device lacks: serving (CTranslate2's
#             wheel) and tryit (Node.js)); chapters the record holds clean for the same chapter
#             and package code are skipped (--skip-clean), so each call goes on where the last
#             stopped; $SECONDS_CAP caps the call (default 540 s: the record keeps the chapters
#             that finished; a chapter that trains stops at the cap as at any SIGTERM)
#   table3    Table 3's grid under the full profile (the small preset, 2,600 steps a row, ten
#             validations; the base row with seeds 0, 1 and 2) as $JOBS processes on the one GPU
#             (default 6), into results/variations-full-cuda/, which the chapters "Table 3" and
#             "Subwords" read under the full profile on CUDA; rows recorded already are skipped,
#             so each call goes on where the last stopped; $SECONDS_CAP caps it (default 540 s).
#             It then prints the base row's validation BLEU and whether it converged (within
#             0.5 BLEU over its last 20 % of validations). The training curves of the rows
#             still running go to OUT too (progress.tar.gz): /tmp/runs stays while the machine is
#             warm, so a call made within its 30 s continues those rows where they stopped. The
#             word-level rows need spaCy: install its wheels first (`wheels`, below), its own
#             wheel in one call and the rest in the next (on 2026-11-27, 25 of the 26 rows in
#             one 8-minute call with JOBS=12 on an H200: results/gpu-calls-h200.log)
#   decoding  benchmarks/decoding.py with the shipped model (no training needed): 2 min with
#             --no-engines; arguments after OUT go to decoding.py, $DECODING_RECORD names the
#             record (default results/bench-decoding-cuda.json). With its engines (ours, the
#             `transformers` the device has, and CTranslate2 on CUDA where its wheel decodes
#             there; the record's `left_out` says why not), CTranslate2's wheel travels first:
#             it is 43 MB, more than one call carries, so it is split in two parts that the
#             `wheels` step puts together and checks against its SHA-256 (below)
#   wmt       the WMT-shaped step alone (every change of issue 49's part 1 on and off, plain and
#             compiled, and compiled with CUDA graphs and with max-autotune, each with the spread
#             of its steps) with the 20 kernels that take the most time: 3 min before the two
#             modes were added; max-autotune's tuning ran past 230 s without finishing on
#             2026-11-30 (results/gpu-calls-h200.log), so give it a call of its own
#             (SECONDS_CAP is not applied: keep timeout_s at the call's limit);
#             arguments after OUT go to wmt_throughput.py (e.g. --variant NAME, repeated, to time
#             a few variants side by side), and $WMT_RECORD names the record (default
#             results/bench-wmt-base-cuda.json)
#
# ddp and base fit one call together, ddp started 20 s later in the background (the GPU has room):
#   (sleep 20; bash benchmarks/gpu.sh ddp $OUT/ddp) & SECONDS_CAP=420 bash benchmarks/gpu.sh base $OUT
#
# The chapters import what the device's Python lacks: IPython, altair, nbformat and pooch (12 MB
# with their needs; matplotlib is there), spaCy (the word tokenizer, 60 MB with its needs), ruff
# (the appendix "How the package is built" exports the package) and vl-convert-python (the
# attention explorer's offline page). With the working tree (28 MB) a call carries at most 36 MB,
# so they travel in four calls, one after the other within the machine's 30 s (on 2026-11-29 the
# three `wheels` calls took 1.5 s each, and the machine's start 35 s):
#
#   W="pip download --only-binary=:all: --python-version 3.12 --implementation cp \
#      --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
#      --platform manylinux_2_17_x86_64 --platform manylinux_2_27_x86_64"
#   $W -d .gpu/whl pooch platformdirs ipython matplotlib-inline altair nbformat   # then remove
#   $W -d .gpu-spacy2 spacy ruff==0.17.6 && mkdir .gpu-spacy && mv .gpu-spacy2/spacy-3* .gpu-spacy/
#   $W --no-deps -d .gpu-vl vl-convert-python
#   echo /.gpu-spacy/ >> .git/info/exclude; echo /.gpu-spacy2/ >> .git/info/exclude
#   echo /.gpu-vl/ >> .git/info/exclude
#
# and from both folders of wheels remove those the device has (numpy, tqdm, requests, jinja2,
# packaging, setuptools, typer, click, rich, pygments, markdown-it-py, certifi, idna, urllib3,
# charset-normalizer, typing-extensions, h11, httpx, httpcore, anyio, wrapt, psutil, attrs,
# narwhals, markupsafe). CTranslate2's wheel (for `decoding`'s engines), in two parts:
#
#   $W --no-deps -d .gpu-ct2a ctranslate2==4.8.5 && cd .gpu-ct2a && w=$(ls *.whl) &&
#   sha256sum "$w" > "$w.sha256" && split -b 22M "$w" "$w.part-" && rm "$w" && mkdir ../.gpu-ct2b &&
#   mv "$w.part-ab" ../.gpu-ct2b/ && cp "$w.sha256" ../.gpu-ct2b/ && cd ..
#
# (carry [".gpu-ct2a"], `bash benchmarks/gpu.sh wheels .gpu-ct2a`, then the same with .gpu-ct2b;
# $GPU_SITE and $GPU_PARTS name the folders it installs into and gathers parts in). Then the
# calls: carry [".gpu-spacy"], `bash benchmarks/gpu.sh wheels .gpu-spacy`; carry [".gpu-spacy2"],
# `... wheels .gpu-spacy2`; carry [".gpu-vl"], `... wheels .gpu-vl`; carry [".gpu"], `bash
# benchmarks/gpu.sh chapters $OUT`. A call more than 30 s after the last finds a fresh machine,
# without what the earlier calls installed.
set -euo pipefail
usage="usage: bash benchmarks/gpu.sh bench|ddp|base|wheels|chapters|table3|decoding|wmt OUT"
step=${1:?$usage}
out=${2:?$usage}
if [ "$step" = wheels ]; then  # OUT is the folder of wheels, or of parts of a wheel
    site=${GPU_SITE:-/tmp/site-chapters} parts=${GPU_PARTS:-/tmp/wheel-parts}
    mkdir -p "$parts"
    wheels=()
    for file in "$out"/*; do
        case "$file" in
        *.whl) wheels+=("$file") ;;
        *.whl.part-* | *.whl.sha256) cp "$file" "$parts/" ;;
        esac
    done
    for sum in "$parts"/*.whl.sha256; do  # a wheel too large for one call, split in parts
        [ -e "$sum" ] || continue
        whole=${sum%.sha256}
        cat "$whole".part-* > "$whole"
        if (cd "$parts" && sha256sum --quiet --check "${sum##*/}" > /dev/null 2>&1); then
            wheels+=("$whole")
            rm "$sum" "$whole".part-*
        else
            rm "$whole"
            echo "${whole##*/}: $(ls "$whole".part-* | wc -l) part(s) so far; carry the rest"
        fi
    done
    if [ "${#wheels[@]}" -gt 0 ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$site" "${wheels[@]}"
        rm -f "$parts"/*.whl  # (the wheels put together from parts, installed)
    fi
    echo "installed ${#wheels[@]} wheels into $site"
    exit 0
fi
mkdir -p "$out"
shift 2
here=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .gpu/whl/*.whl
export PYTHONPATH="$here/src:$here/benchmarks:/tmp/site:/tmp/site-chapters" PYTHONUNBUFFERED=1
export ANNOTATED_TRANSFORMER_MULTI30K="$here/.gpu/multi30k"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())'
log() { echo "[$(date +%H:%M:%S)] $*"; }

case "$step" in
bench)
    log "training speed, base preset"
    python3 benchmarks/train.py --preset base --code-2022 .gpu/the_annotated_transformer.py \
        --compile --bf16 --device cuda --output results/bench-train-cuda.json
    log "the WMT 2014 step's shape"
    python3 benchmarks/wmt_throughput.py --device cuda --output results/bench-wmt-base-cuda.json
    cp results/bench-train-cuda.json results/bench-wmt-base-cuda.json "$out/"
    ;;
ddp)
    log "torchrun with NCCL against the plain run"
    python3 benchmarks/ddp_check.py --preset base --steps 30 --device cuda \
        --output results/ddp-check-cuda.json
    cp results/ddp-check-cuda.json "$out/"
    ;;
base)
    run=/tmp/runs/base
    log "training the base preset (at most ${SECONDS_CAP:=330} s)"
    status=0
    timeout -s TERM "$SECONDS_CAP" python3 -m annotated_transformer train --preset base \
        --out "$run" --device cuda --no-progress --set save_every=250 "$@" || status=$?
    log "train exited with status $status (124: stopped at the cap, after saving a checkpoint)"
    python3 -m annotated_transformer average "$run" --last 5 --out "$run/average.pt"
    rm -rf results/multi30k-base && mkdir -p results/multi30k-base
    for beam in 4 1; do
        python3 -m annotated_transformer evaluate --checkpoint "$run/average.pt" --split all \
            --device cuda --beam "$beam" --results results/multi30k-base
    done
    cp "$run/config.json" "$run/run.json" "$run/metrics.jsonl" results/multi30k-base/
    if [ "${DECODING:-1}" = 1 ]; then
        log "decoding speed"
        python3 benchmarks/decoding.py --checkpoint "$run/average.pt" --device cuda \
            --output results/bench-decoding-cuda.json
        cp results/bench-decoding-cuda.json "$out/"
    fi
    tar -C results -czf "$out/multi30k-base.tar.gz" multi30k-base
    ;;
chapters)
    if [ "$#" -eq 0 ]; then
        set -- $(ls book/*.ipynb | grep -v -e serving -e tryit)
    fi
    log "the chapters under the full profile: $*"
    status=0
    ANNOTATED_TRANSFORMER_PROFILE=full timeout -s TERM "${SECONDS_CAP:-540}" python3 \
        tools/run_chapters.py --record results/chapters-full-cuda.json --skip-clean "$@" \
        || status=$?
    log "run_chapters exited with status $status (1: a chapter failed; 124: stopped at the cap)"
    cp results/chapters-full-cuda.json "$out/"
    ;;
table3)
    log "Table 3's grid, full profile, ${JOBS:=6} processes (at most ${SECONDS_CAP:=540} s)"
    status=0
    timeout -s TERM "$SECONDS_CAP" python3 -m annotated_transformer grid --profile full \
        --jobs "$JOBS" --device cuda --results results/variations-full-cuda \
        --runs /tmp/runs/variations "$@" || status=$?
    log "grid exited with status $status (124: stopped at the cap; the next call goes on)"
    python3 benchmarks/converged.py /tmp/runs/variations/full/base/metrics.jsonl || true
    tar -C results -czf "$out/variations-full-cuda.tar.gz" variations-full-cuda
    (cd /tmp/runs/variations && tar -czf "$out/progress.tar.gz" $(find . -name metrics.jsonl)) || true
    ;;
wmt)
    log "the WMT 2014 step's shape, with its top kernels"
    record=${WMT_RECORD:-results/bench-wmt-base-cuda.json}
    python3 benchmarks/wmt_throughput.py --device cuda --profile-kernels 20 "$@" --output "$record"
    cp "$record" "$out/"
    ;;
decoding)
    log "decoding speed, the shipped model"
    record=${DECODING_RECORD:-results/bench-decoding-cuda.json}
    python3 benchmarks/decoding.py --device cuda "$@" --output "$record"
    cp "$record" "$out/"
    ;;
*)
    echo "benchmarks/gpu.sh: unknown step $step: expected bench, ddp, base, wheels, chapters, table3, decoding or wmt" >&2
    exit 2
    ;;
esac
log "done"
