"""Write the shipped model's card from its files and the records that score it.

    python tools/model_card.py

reads `src/annotated_transformer/pretrained_model/` (the files `save-pretrained` wrote) and
`results/release/` (the training run's settings, log and metrics, and the evaluation records
that `results/release/README.md` lists), translates the card's own example sentences with the
shipped model, and writes `MODEL_CARD.md` beside the weights. Every number in the card comes from
those files; `tests/test_pretrained.py` checks the card against them.
"""

import json
import sys
from pathlib import Path

from annotated_transformer.data.multi30k import read_split
from annotated_transformer.evaluation.scores import EVAL_SPLITS, load_results
from annotated_transformer.model.transformer import count_parameters
from annotated_transformer.pretrained import FILES, read_sums, shipped_folder
from annotated_transformer.translator import Translator
from annotated_transformer.util.atomic import atomic_write

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "results" / "release"
BLEU_MARK = 35.0  # the card says when full-val greedy BLEU first reached this

# Written for this card (not Multi30k lines): what the model was trained for, image captions...
CAPTIONS = [
    "Ein Hund rennt durch den Schnee.",
    "Zwei Kinder spielen mit einem roten Ball am Strand.",
    "Eine Frau mit Sonnenbrille fährt auf einem Fahrrad durch die Stadt.",
    "Ein alter Mann sitzt auf einer Bank und füttert Tauben.",
    "Drei Musiker spielen Gitarre auf einer Bühne vor vielen Leuten.",
]
# ... and what it was not: these show what it gets wrong outside image captions.
OUTSIDE = [
    "Ich habe gestern meine Steuererklärung beim Finanzamt abgegeben.",
    "Kannst du mir bitte sagen, wie spät es ist?",
    "Die Zentralbank hat die Zinsen um einen halben Prozentpunkt erhöht.",
    "Das Wetter wird morgen schlechter.",
]


def scores_table(tag: str) -> list[str]:
    rows = ["| split | sentences | BLEU | chrF | BLEU (lowercased) |", "|---|---|---|---|---|"]
    for split in EVAL_SPLITS:
        r = load_results(RECORDS / f"{split}-{tag}.json")
        rows.append(f"| {split} | {r['sentences']:,} | {r['sacrebleu']['score']:.2f} | "
                    f"{r['chrf']['score']:.2f} | {r['bleu_lowercase']['score']:.2f} |")  # fmt: skip
    return rows


def training_facts() -> dict:
    metrics = [json.loads(line) for line in (RECORDS / "metrics.jsonl").read_text().splitlines()]
    train = [m for m in metrics if m["kind"] == "train"]
    val = [m for m in metrics if m["kind"] == "val"]
    elapsed = {m["step"]: m["elapsed_s"] for m in train}

    def when(m: dict) -> float:  # a validation's time: its own, or its step's training line's
        return m.get("elapsed_s", elapsed.get(m["step"], train[-1]["elapsed_s"]))

    first = next((m for m in val if m["bleu"] >= BLEU_MARK), None)
    wall = json.loads((RECORDS / "train-time.json").read_text())
    return {"steps": train[-1]["step"], "train_s": train[-1]["elapsed_s"], "wall": wall,
            "first": first and (first["step"], when(first), first["bleu"]),
            "best": max(val, key=lambda m: m["bleu"]), "last": val[-1]}  # fmt: skip


def lines_of_card(translator, sums: dict, sizes: dict) -> list[str]:
    """The card above its examples: what the model is, its data, its training and its scores."""
    return [
        "# Model card: `annotated-transformer` release model, German→English (Multi30k)",
        "",
        "The model that ships with the `annotated-transformer` package: the Transformer of "
        '"Attention Is All You Need" as the book builds it, trained on the Multi30k image '
        "captions on a 2-core CPU. It translates German image captions into English.",
        "",
        "```bash",
        'annotated-transformer translate "Ein Hund rennt durch den Schnee."',
        "```",
        "```python",
        "from annotated_transformer.translator import Translator",
        "",
        'Translator.pretrained().translate(["Ein Hund rennt durch den Schnee."])',
        "```",
        "",
        *model_section(translator, sums, sizes),
        *data_section(),
        *training_section(translator.config),
        *scores_section(),
    ]


def model_section(translator, sums: dict, sizes: dict) -> list[str]:
    m = translator.config.model
    steps = [entry["step"] for entry in translator.origin["averaged_from"]]
    return [
        "## The model",
        "",
        "| | |",
        "|---|---|",
        f"| architecture | encoder–decoder Transformer, post-norm (§3): N = {m.N}, "
        f"d_model = {m.d_model}, d_ff = {m.d_ff}, h = {m.h}, P_drop = {m.dropout} |",
        f"| vocabulary | one BPE vocabulary of {len(translator.bpe.vocab):,} pieces for both "
        "languages, byte fallback; source, target and output embeddings tied (§3.4) |",
        f"| parameters | {count_parameters(translator.model):,} |",
        f"| weights | the average of the checkpoints at steps {', '.join(map(str, steps))} (§6.1), "
        "stored in float16, computed in float32 |",
        "| decoding | beam search, 4 beams, length penalty α = 0.6, output ≤ source + 50 tokens "
        "(§6.1); plain beam search, as the paper |",
        "",
        "| file | bytes | SHA-256 |",
        "|---|---|---|",
        *(f"| `{name}` | {sizes[name]:,} | `{sums[name]}` |" for name in FILES),
        "",
        "Loading checks each file against `SHA256SUMS` first; the weights are safetensors (tensors "
        "only, nothing is unpickled).",
        "",
    ]


def data_section() -> list[str]:
    return [
        "## Data",
        "",
        "Multi30k, task 1 (Elliott, Frank, Sima'an and Specia, 2016): 29,000 German–English "
        "caption pairs of Flickr30K images for training, 1,014 for validation, and the test sets "
        "below; raw files of github.com/multi30k/dataset, checked by SHA-256. That repository "
        "states no licence of its own; its English captions are Flickr30K's (Young et al., 2014), "
        "distributed by their authors for research. These weights ship with the package (MIT) "
        "for study and research; check the data's terms before any other use.",
        "",
    ]


def training_section(config) -> list[str]:
    run = json.loads((RECORDS / "run.json").read_text())
    facts = training_facts()
    first = facts["first"]
    reached = (
        f"step {first[0]:,}, after {first[1] / 60:.1f} minutes of training (BLEU {first[2]:.2f})"
        if first else f"never (best: {facts['best']['bleu']:.2f})"
    )  # fmt: skip
    return [
        "## Training",
        "",
        "```bash",
        "annotated-transformer train --preset release --out runs/release \\",
        "    --data-dir ../shared/data/multi30k --no-progress",
        "annotated-transformer average runs/release --last 5 --out runs/release/average.pt",
        "annotated-transformer save-pretrained runs/release/average.pt \\",
        "    --out src/annotated_transformer/pretrained_model --into-package",
        "```",
        "",
        f"Hardware: {run['device']}, no GPU; torch {run['torch']}, Python {run['python']}, "
        f"annotated-transformer {run['annotated_transformer']}.",
        f"Training: {facts['steps']:,} steps ({config.epochs} epochs), "
        f"{facts['train_s'] / 60:.1f} minutes of training; the whole command, BPE learning and "
        "validations included, took "
        f"{facts['wall']['seconds'] / 60:.1f} minutes of wall time ({facts['wall']['machine']}).",
        f"Greedy BLEU on all of val, measured every 250 steps, first reached {BLEU_MARK:g} at "
        f"{reached}; at the last step it was {facts['last']['bleu']:.2f}.",
        "",
    ]


def scores_section() -> list[str]:
    test = load_results(RECORDS / "test2016-shipped-beam4.json")
    fp32, fp16 = (
        load_results(RECORDS / f"val-{tag}.json") for tag in ("avg5-beam4", "shipped-beam4")
    )
    return [
        "## Scores",
        "",
        "The shipped (float16) weights, beam search with 4 beams and α = 0.6, cased sacreBLEU "
        "on detokenized output against the raw references:",
        "",
        *scores_table("shipped-beam4"),
        "",
        "Greedy decoding, the same weights:",
        "",
        *scores_table("shipped-greedy"),
        "",
        "Signatures:",
        "",
        f"- BLEU: `{test['sacrebleu']['signature']}`",
        f"- chrF: `{test['chrf']['signature']}`",
        f"- BLEU (lowercased): `{test['bleu_lowercase']['signature']}`",
        "",
        f"Float16 storage: val BLEU {fp16['sacrebleu']['score']:.2f} with the shipped float16 "
        f"weights against {fp32['sacrebleu']['score']:.2f} with the float32 average they were "
        "rounded from (both computed in float32, beam 4).",
        "",
        "Every score re-scores from its committed hypotheses: "
        '`annotated_transformer.evaluation.scores.rescore("results/release/test2016-shipped-beam4.json")`.',
        "",
    ]


def examples(translator, title: str, intro: str, sentences: list[str]) -> list[str]:
    rows = [f"## {title}", "", intro, "", "| German | the model's English |", "|---|---|"]
    for de, en in zip(sentences, translator.translate(sentences), strict=True):
        rows.append(f"| {de} | {en} |")
    return [*rows, ""]


def main() -> int:
    folder = shipped_folder()
    translator = Translator.pretrained(folder, device="cpu")
    sums = read_sums(folder)
    sizes = {name: (folder / name).stat().st_size for name in FILES}
    card = lines_of_card(translator, sums, sizes)
    card += examples(translator, "Examples", "Captions written for this card (not from Multi30k), "
                     "translated by the shipped model:", CAPTIONS)  # fmt: skip
    german = [de for de, _ in read_split("train")]  # ($ANNOTATED_TRANSFORMER_MULTI30K, or fetched)
    questions = sum("?" in de for de in german)
    first_person = sum(" ich " in f" {de.lower()} " for de in german)
    limits = (
        f"It learned {len(german):,} image captions and nothing else: short descriptions of "
        "people, animals and places in the present tense. Outside them it guesses, fluently and "
        "wrongly, as these sentences written for this card show. Of its German training "
        f'captions, {questions} hold a question mark and {first_person} the word "ich"; each '
        "describes a picture. It translates one sentence at a time, at most "
        f"{translator.config.model.max_len - 1} pieces; and it carries the captions' habits "
        "(for example, who is called a man or a woman)."
    )
    card += examples(translator, "Limitations", limits, OUTSIDE)
    with atomic_write(folder / "MODEL_CARD.md", "w") as file:
        file.write("\n".join(card).rstrip("\n") + "\n")
    print(f"wrote {folder / 'MODEL_CARD.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
