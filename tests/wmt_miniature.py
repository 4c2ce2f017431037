"""A miniature WMT 2014 English–German in the real archives' layout, for tests and the chapter.

Every sentence is synthetic: made of a small invented lexicon, German a word-for-word mapping of
English with one reordering rule, so that a tiny model learns something in a few steps. Nothing
comes from WMT or Multi30k. The six archives carry the real names and the real inner paths
(checked against TensorFlow Datasets, sacreBLEU and fairseq's prepare-wmt14en2de.sh), beside
decoys of other language pairs that the extraction must skip; the test sets are WMT's SGML.

`make_mirror(folder)` writes the archives and `SOURCES.json`, the registry of the same sources
with the miniature's own checksums (SHA-256 for the training archives and newstest2013, MD5 for
the test sets, as the package's); `download --test-sources` accepts it, for tests only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import random
import tarfile
from pathlib import Path

from annotated_transformer.data import wmt14

LEXICON = {  # English -> German, invented pairs of common words (no corpus sentence)
    "the": "die", "house": "haus", "cat": "katze", "dog": "hund", "sees": "sieht",
    "big": "grosse", "small": "kleine", "red": "rote", "green": "gruene", "car": "auto",
    "man": "mann", "woman": "frau", "child": "kind", "eats": "isst", "reads": "liest",
    "book": "buch", "apple": "apfel", "today": "heute", "city": "stadt", "and": "und",
    "old": "alte", "new": "neue", "tree": "baum", "finds": "findet", "bread": "brot",
}  # fmt: skip
NOUNS = ["house", "cat", "dog", "car", "man", "woman", "child", "book", "apple", "city", "tree",
         "bread"]  # fmt: skip
ADJECTIVES = ["big", "small", "red", "green", "old", "new"]
VERBS = ["sees", "eats", "reads", "finds"]
COUNTS = {"europarl-v7": 240, "commoncrawl": 180, "news-commentary-v9": 120, "newstest2013": 40,
          "newstest2014-full": 48, "newstest2014-filtered": 40}  # fmt: skip


def sentence_pair(rng: random.Random) -> tuple[str, str]:
    """One invented pair: "the ADJ NOUN VERB the NOUN [today]"; German puts "heute" second."""
    words = ["the", rng.choice(ADJECTIVES), rng.choice(NOUNS), rng.choice(VERBS), "the",
             rng.choice(NOUNS)]  # fmt: skip
    german = [LEXICON[w] for w in words]
    if rng.random() < 0.3:
        words.append("today")
        german.insert(2, LEXICON["today"])  # a reordering the model must learn
    return " ".join(words).capitalize() + ".", " ".join(german).capitalize() + "."


def sgml(lines: list[str], lang: str, kind: str) -> str:
    """WMT's SGML: documents of `<seg id="N">` lines, as the real test sets are written."""
    tag = "srcset" if kind == "src" else "refset"
    out = [f'<{tag} setid="newstest2014" srclang="any" trglang="{lang}">']
    for start in range(0, len(lines), 8):  # documents of 8 sentences
        out.append(f'<doc sysid="{kind}" docid="mini-{start}" genre="news" origlang="en">')
        out.append("<p>")
        out += [f'<seg id="{start + i + 1}">{line}</seg>' for i, line in
                enumerate(lines[start : start + 8])]  # fmt: skip
        out += ["</p>", "</doc>"]
    return "\n".join([*out, f"</{tag}>"]) + "\n"


def tar_gz(path: Path, members: dict[str, str]) -> None:
    """A tar.gz of text members, written in a fixed order with fixed times (same bytes each run)."""
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_400_000_000, 0o644
            tar.addfile(info, io.BytesIO(data))


def members_of(name: str, pairs: list[tuple[str, str]]) -> dict[str, str]:
    """The archive of source `name`: its real members, then decoys of other language pairs."""
    source = wmt14.SOURCES[name]
    en, de = [p[0] for p in pairs], [p[1] for p in pairs]
    if source.sgml:
        real = {source.members["en"]: sgml(en, "en", "src"),
                source.members["de"]: sgml(de, "de", "ref")}  # fmt: skip
        decoy = source.members["en"].replace("deen-src.en", "fren-src.fr")
        return {**real, decoy: sgml(en[:3], "fr", "src")}
    real = {source.members["en"]: "\n".join(en) + "\n", source.members["de"]: "\n".join(de) + "\n"}
    decoy = source.members["en"].replace("de-en", "fr-en").removesuffix(".en") + ".fr"
    return {**real, decoy: "Bonjour.\n"}


def make_mirror(folder: Path, seed: int = 0, misaligned: str | None = None) -> Path:
    """Write the six miniature archives into `folder`; return its `SOURCES.json`.

    `misaligned` names a source whose German side loses its last sentence (a bad archive whose
    checksum the registry nevertheless lists, so that only the extraction can find it).
    """
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    test = [sentence_pair(rng) for _ in range(COUNTS["newstest2014-full"])]
    registry = {}
    for name, source in wmt14.SOURCES.items():
        pairs = [sentence_pair(rng) for _ in range(COUNTS[name])]
        if name.startswith("newstest2014"):  # the filtered set is a subset of the full one
            pairs = test if name.endswith("full") else test[: COUNTS[name]]
        if name == "europarl-v7":  # what extraction cleans: spaces, an empty side
            pairs[1] = ("  The  old cat   sees the tree. ", "Die alte katze sieht die baum.")
            pairs[2] = ("The dog eats.", "")
        members = members_of(name, pairs)
        if name == misaligned:
            key = source.members["de"]
            members[key] = "".join(members[key].splitlines(keepends=True)[:-1])
        tar_gz(folder / source.file, members)
        own = {"checksum": checksum(folder, source), "size": None}
        registry[name] = dataclasses.asdict(source) | own
    path = folder / "SOURCES.json"
    path.write_text(json.dumps(registry, indent=1) + "\n", encoding="utf-8")
    return path


def checksum(folder: Path, source: wmt14.Source) -> str:
    """The miniature archive's checksum, with the algorithm the package uses for the real one."""
    algorithm = source.checksum.split(":")[0]
    return f"{algorithm}:{hashlib.new(algorithm, (folder / source.file).read_bytes()).hexdigest()}"
