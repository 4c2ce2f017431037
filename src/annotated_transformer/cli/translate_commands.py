"""The commands that translate with a trained model: `translate` (arguments, or standard input a
chunk at a time), `kernels` (its attention compiled for this processor, once), `evaluate` (the
splits of the model's corpus scored with sacreBLEU, optionally recorded) and `attention` (every
head's weights for one sentence, as JSON).

Hand-written; taught by the chapters "A real-world example", "Results" and "Engineering a
training run" (evaluate, translate), "Attention" and "Results" (attention), "At the paper's
scale" (newstest), "Serving the model: CTranslate2 and `transformers`" (translate a CTranslate2
export, --quantize), "Fast decoding" (kernels, translate --verbose).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from annotated_transformer.cli.common import (
    LANGUAGE_NAMES,
    PROG,
    UsageError,
    check_device,
    check_output_file,
    check_output_folder,
    check_replaceable_file,
)
from annotated_transformer.cli.model_inputs import check_model_input, open_model
from annotated_transformer.cli.standard_input import stdin_chunks
from annotated_transformer.cli.translate_input import numbered, translate_chunks, warn_about_lines
from annotated_transformer.data.vocab import normalize


def cmd_translate(args: argparse.Namespace) -> int:
    """Translate sentences (arguments, or one per line on stdin) in the direction the model was
    trained (its run's `pair`; the shipped model: German into English). Standard input is read,
    translated and written a chunk at a time (`--chunk` lines at most)."""
    if sys.stdout is None:
        raise OSError("standard output is closed: the translations would be lost")
    check_model_input(args.checkpoint, "translate")
    check_device(args.device)
    if args.text == ["-"]:  # (-, alone: standard input, as is usual)
        args.text = []
    chunks = iter([args.text]) if args.text else stdin_chunks(args.chunk)
    read, empty = 0, 0  # empty: lines held until a first sentence comes
    for chunk in chunks:
        read += len(chunk)
        if not any(normalize(line) for line in chunk):  # (before the first sentence: held)
            warn_about_lines(
                None, chunk, read - len(chunk) + 1, "argument" if args.text else "line"
            )
            empty += len(chunk)
            continue
        translator = open_model(args, "translate")
        if getattr(args, "verbose", False):
            print(f"{PROG}: {_attention_note(translator)}", file=sys.stderr)
        print("\n" * empty, end="")
        first = (chunk, read - len(chunk) + 1)
        translate_chunks(translator, itertools.chain([first], numbered(chunks, read)), args)
        return 0
    raise UsageError(
        "nothing to translate: give sentences as arguments, or one per line on standard input"
    )


def _attention_note(translator: object) -> str:
    """Which attention `translator` decodes with, and why (`decoding.kernels.KernelsInCache`)."""
    keeper = getattr(translator, "attention", None)
    if keeper is None:  # (a CTranslate2 export)
        return "attention: CTranslate2's own"
    keeper(translator.model)  # type: ignore[attr-defined]
    return keeper.why


def cmd_kernels(args: argparse.Namespace) -> int:
    """Compile the attention kernels of a model (the shipped one, or --checkpoint's) for this
    processor into the package's cache, where every later `translate` finds them (chapter "Fast
    decoding", section "Attention at one query, compiled ahead of time")."""
    import time

    from annotated_transformer.decoding import kernels

    check_model_input(args.checkpoint, "kernels")
    translator = open_model(args, "kernels")
    shape = kernels.attention_shape(translator.model)
    began = time.perf_counter()
    built, why = kernels.ensure_kernels(*shape, rebuild=args.rebuild)
    if why is None:
        print(f"already built: {built.folder}")
    else:  # (none were there, those there did not load, or --rebuild)
        print(f"built in {time.perf_counter() - began:.1f} s ({why}): {built.folder}")
    return 0


def _decoding_name(
    beam: int, alpha: float, keep_greedy: bool = False, search: str = "k-finished"
) -> str:
    if beam == 1:
        return "greedy decoding"
    lane = ", with the greedy hypothesis" if keep_greedy else ""
    rule = ", tensor2tensor's stopping rule" if search == "t2t" else ""
    return f"beam search, {beam} beams, alpha {alpha}{lane}{rule}"


BOTH_FORMS = (  # `--split newstest2014` names two test sets: the user says which
    "--split newstest2014: there are two; say newstest2014-full (3,003 sentences, the form whose "
    "scores compare with the paper's) or newstest2014-filtered (2,737, sacreBLEU's wmt14)"
)


def _splits(given: list[str], known: Sequence[str], wmt: Sequence[str] = ()) -> list[str]:
    """The splits `--split` names (each once), or a UsageError; `wmt`: WMT 2014's, also known."""
    if "newstest2014" in given:
        raise UsageError(BOTH_FORMS)
    if "all" in given:
        if len(given) > 1:
            raise UsageError(f"--split all stands alone: it means every split ({', '.join(known)})")
        return list(known)
    for split in given:
        if split not in (*known, *wmt):
            also = f" (Multi30k), or {', '.join(wmt)} or all (WMT 2014)" if wmt else ""
            raise UsageError(f"--split {split}: expected one of {', '.join(known)} or all{also}")
    return list(dict.fromkeys(given))


def _our_translations(path: Path) -> bool:
    """Whether a file is the translations of a results record (`evaluate --results` wrote it)."""
    from annotated_transformer.evaluation.scores import is_results_record

    suffixes = {f".{code}" for code in LANGUAGE_NAMES}  # SPLIT-TAG.en, or .de (en-de runs)
    return path.suffix in suffixes and is_results_record(path.with_suffix(".json"))


def _check_results(folder: str, split: str, tag: str, target: str = "en") -> None:
    """The two files `--results` writes for a split replace only a record of ours and its
    translations (SPLIT-TAG.en, or .de for an English→German model)."""
    from annotated_transformer.evaluation.scores import is_results_record, results_paths

    hyp_path, json_path = results_paths(folder, split, tag, target)
    instead = "choose another --tag or folder"
    check_replaceable_file(json_path, "--results", is_results_record, "a results record", instead)
    check_replaceable_file(hyp_path, "--results", _our_translations,
                           "the translations of a results record", instead)  # fmt: skip


def _check_tag_fits(folder: str, tag: str | None, splits: Sequence[str]) -> None:
    """The longest file name `--results` writes (SPLIT-TAG.json) fits the folder's file system:
    checked before translating, not after."""
    if tag is None:  # (the default tags are short)
        return
    existing = next(p for p in (Path(folder), *Path(folder).parents) if p.exists())
    try:
        most = os.pathconf(existing, "PC_NAME_MAX")
    except (AttributeError, OSError, ValueError):  # (no pathconf on Windows)
        most = 255
    name = f"{max(splits, key=len)}-{tag}.json"
    if len(os.fsencode(name)) > most:
        raise UsageError(
            f"--tag: {len(tag)} characters make the file name {name[:40]}... "
            f"{len(os.fsencode(name))} bytes long; {existing} takes at most {most}"
        )


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Translate the splits of the model's corpus (Multi30k, or WMT 2014's newstest sets) in its
    direction and score them with sacreBLEU; optionally record the results."""
    from annotated_transformer.data import multi30k
    from annotated_transformer.evaluation.newstest import NEWSTEST
    from annotated_transformer.evaluation.scores import EVAL_SPLITS

    splits = _splits(args.split or ["test2016"], EVAL_SPLITS, tuple(NEWSTEST))
    if args.output and len(splits) > 1:
        raise UsageError("--output takes the translations of one split; use --results for many")
    if args.tag is not None and (not args.tag or "/" in args.tag or args.tag.startswith(".")):
        raise UsageError(f"--tag {args.tag!r}: the tag names files (SPLIT-TAG.json): give a name "
                         f"without / that does not start with a dot")  # fmt: skip
    if args.output:
        check_output_file(args.output, "--output", _our_translations,
                          "the translations of a results record")  # fmt: skip
    if args.results:
        check_output_folder(args.results, "--results")
        _check_tag_fits(args.results, args.tag, splits)
    check_model_input(args.checkpoint, "evaluate")
    check_device(args.device)
    translator = open_model(args, "evaluate")
    splits, wmt = _splits_of_the_run(args.split, translator.config.dataset), None
    if translator.config.dataset != "multi30k":
        wmt = _newstest_folder(args, splits, translator.config.pair)
    averaged = translator.origin.get("averaged_from")
    tag = args.tag or "-".join([
        "shipped" if translator.origin.get("shipped") else
        f"avg{len(averaged)}" if averaged else "last",
        "greedy" if args.beam == 1 else f"beam{args.beam}",
        *(["keepgreedy"] if args.keep_greedy and args.beam > 1 else []),
        *(["t2t"] if args.search == "t2t" and args.beam > 1 else []),
        *([args.quantize] if args.quantize else []),
    ])  # fmt: skip
    for split in splits:  # (the tag is known now: the checkpoint says if it is an average)
        if args.results:
            _check_results(args.results, split, tag, translator.config.languages[1])
    for split in splits if wmt is None else []:  # every input file, checked before translating
        for lang in multi30k.LANGUAGES:
            multi30k.fetch(split, lang, args.data_dir)
    for split in splits:
        _evaluate_split(args, translator, split, tag, wmt)
    return 0


def _splits_of_the_run(given: list[str] | None, dataset: str) -> list[str]:
    """The splits to evaluate, of the corpus the model was trained on (default: its test set)."""
    from annotated_transformer.evaluation.newstest import NEWSTEST
    from annotated_transformer.evaluation.scores import EVAL_SPLITS

    known = EVAL_SPLITS if dataset == "multi30k" else tuple(NEWSTEST)
    given = given or ["test2016" if dataset == "multi30k" else "newstest2014-full"]
    foreign = [split for split in given if split not in (*known, "all")]
    if foreign:
        raise UsageError(f"--split {foreign[0]}: not a split of {dataset}, the corpus this model "
                         f"was trained on: expected one of {', '.join(known)} or all")  # fmt: skip
    return list(known) if "all" in given else list(dict.fromkeys(given))


def _newstest_folder(args: argparse.Namespace, splits: list[str], pair: str) -> Path:
    """The WMT 2014 text folder (--data-dir, else the default), holding every file `splits` read."""
    from annotated_transformer.data import wmt14
    from annotated_transformer.evaluation.newstest import newstest_files
    from annotated_transformer.util.atomic import check_regular_file

    folder = Path(args.data_dir) if args.data_dir is not None else wmt14.data_dir()
    for split in splits:
        for path in newstest_files(split, folder, pair):
            check_regular_file(path)  # (a pipe is not read: reading it may not end)
            if not path.is_file():
                raise FileNotFoundError(f"{path}: missing; write it with `{PROG} download "
                                        f"--dataset wmt14-en-de --data-dir {folder}`")  # fmt: skip
    return folder


def _evaluate_split(
    args: argparse.Namespace, translator, split: str, tag: str, wmt: Path | None = None
) -> None:
    """Translate and score one split (of WMT 2014, in the folder `wmt`, if given); print the
    scores and write what was asked."""
    import shlex

    from annotated_transformer.evaluation import scores as evaluation
    from annotated_transformer.evaluation.newstest import evaluate_newstest, newstest_files
    from annotated_transformer.util.atomic import atomic_write
    from annotated_transformer.util.device import describe_device

    run = evaluation.evaluate_split if wmt is None else evaluate_newstest
    result = run(
        translator, split, args.data_dir if wmt is None else wmt, beam_size=args.beam,
        alpha=args.alpha, keep_greedy=args.keep_greedy, progress=sys.stderr.isatty(),
        search=args.search,
    )  # fmt: skip
    skipped = f" ({result.skipped} pairs with an empty side left out)" if result.skipped else ""
    decoding = _decoding_name(args.beam, args.alpha, args.keep_greedy, args.search)
    print(f"{split}: {len(result.hypotheses)} sentences{skipped}, {decoding}, "
          f"{result.seconds:.1f} s")  # fmt: skip
    for key in ("sacrebleu", "chrf", "bleu_lowercase"):
        print(f"  {result.scores[key]['text']}")
    if args.output:
        with atomic_write(args.output, "w") as file:
            file.writelines(h + "\n" for h in result.hypotheses)
    if args.results:
        path = evaluation.write_results(
            result, args.results, tag,
            command=shlex.join([PROG, *sys.argv[1:]]),
            checkpoint=translator.origin,
            decoding={
                "beam_size": args.beam,
                "alpha": args.alpha if args.beam > 1 else None,
                "keep_greedy": args.keep_greedy and args.beam > 1,
                "search": args.search if args.beam > 1 else None,
                "max_output_tokens": "source tokens + 50 (§6.1)",
                **({"quantize": args.quantize} if args.quantize else {}),
            },
            device=describe_device(translator.device),
            data_dir=args.data_dir if wmt is None else wmt,
            reference=None if wmt is None else newstest_files(split, wmt, result.pair)[1],
        )  # fmt: skip
        print(f"  wrote {path}")


def _our_attention_file(path: Path) -> bool:
    """Whether a file is one `attention` wrote (asked only of an existing file)."""
    from annotated_transformer.evaluation.attention_maps import is_attention_record

    return is_attention_record(path)


def cmd_attention(args: argparse.Namespace) -> int:
    """Translate one sentence and save every head's attention weights for it as JSON."""
    if not normalize(args.text):
        raise UsageError("nothing to translate: give one sentence, in the model's source language")
    if args.output != "-":  # (-: standard output)
        check_output_file(args.output, "--output", _our_attention_file, "an attention file")
    check_model_input(args.checkpoint, "attention")
    check_device(args.device)
    import json
    import shlex

    import torch

    from annotated_transformer.data.vocab import BOS, BOS_ID, EOS
    from annotated_transformer.decoding.batched import translate_ids
    from annotated_transformer.evaluation.attention_maps import (
        attention_maps,
        attention_record,
        save_attention_maps,
    )

    translator = open_model(args, "attention")
    (src,) = translator.encode([args.text])  # (S,): the tokens and </s>
    (words,) = translate_ids(
        translator.model, [src], translator.tgt_vocab, max_len=translator.config.model.max_len,
        max_tokens=translator.max_tokens, beam_size=args.beam, alpha=args.alpha,
        keep_greedy=args.keep_greedy, search=args.search, workers=translator.workers,
    )  # fmt: skip
    tgt = torch.tensor([BOS_ID, *translator.tgt_vocab.encode(words)])  # (T,): <s> and the words
    device = translator.device
    maps = attention_maps(translator.model, src.to(device), tgt.to(device))
    translation = translator.detokenize(words)
    about = {
        "command": shlex.join([PROG, *sys.argv[1:]]),
        "checkpoint": translator.origin,
        "source": args.text,
        "translation": translation,
        "unknown_words": translator.unknown_words(args.text),
    }
    src_tokens = [*translator.tokenizer(args.text), EOS]
    if args.output == "-":  # the record alone, for a pipe (`| jq .translation`)
        record = attention_record(maps, src_tokens, [BOS, *words], about)
        print(json.dumps(record, ensure_ascii=False))
        return 0
    save_attention_maps(args.output, maps, src_tokens, [BOS, *words], about)
    print(f"{translation}\nwrote {args.output}")
    return 0
