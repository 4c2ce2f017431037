/*
 * The shipped model, translating in the browser: the JavaScript of the chapter "Try it".
 *
 * Everything a translation needs runs in this page: the BPE tokenizer (section 2), the encoder
 * and one decoder step as ONNX graphs run by onnxruntime-web (section 3), and the paper's beam
 * search (section 4, `simple_beam_search` of the chapter "Decoding", line for line). Section 1
 * gets the files as bytes without `fetch`, so the page works opened from `file://` too, and
 * section 5 is the page itself. In Node, `require` gives the tokenizer and the search, which the
 * tests run against Python's.
 *
 * Shapes as in the Python code: S source tokens, T target tokens so far (`<s>` first), V the
 * vocabulary, N layers, h heads.
 */
(function (root) {
  "use strict";

  const BOS = 1; // <s>
  const EOS = 2; // </s>
  const SPACE = "\u2581"; // ▁, the space before a piece

  // ---- 1. Files as bytes, from script files --------------------------------------------------
  // A page opened from file:// may not `fetch` its neighbours, but it may run their scripts. So
  // the book's build writes each file (model, WebAssembly, tokenizer) as a script that hands its
  // gzip-compressed bytes, in base64, to `addAsset`; the browser's own DecompressionStream
  // inflates them.

  const assets = {}; // file name -> base64 text of its gzip-compressed bytes
  const sizes = {}; // script name -> bytes, from manifest.js: the loading message's "12 of 29 MB"

  function addAsset(name, base64) {
    assets[name] = base64;
  }

  function addManifest(scripts) {
    Object.assign(sizes, scripts);
  }

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = src;
      script.onload = resolve;
      script.onerror = () => reject(new Error(`could not load ${src}`));
      document.head.appendChild(script);
    });
  }

  async function assetBytes(name) {
    const text = atob(assets[name]);
    const packed = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) packed[i] = text.charCodeAt(i);
    const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  // ---- 2. The tokenizer: the shared BPE vocabulary of the chapter "Subwords" ----------------
  // Python's `BPETokenizer` (Hugging Face `tokenizers`), step by step: `normalize` the text; put
  // ▁ before it and for every space; split before each ▁ and around each punctuation character;
  // within each part, merge neighbouring pieces in the order the merges were learned; a character
  // the vocabulary lacks becomes its UTF-8 bytes, one piece each.

  const PUNCTUATION = /^[\p{P}!-\/:-@\[-`{-~]$/u; // Unicode punctuation, and ASCII's symbols

  // Python's `normalize` (annotated_transformer.data.vocab): zero-width characters removed, NFC,
  // each run of SPACES one space, the ends trimmed. SPACES is Python's `str.isspace`, not JS's
  // `\s` (which lacks U+001C-U+001F and U+0085 and adds U+FEFF); tests/test_tryit.py compares them.
  const ZERO_WIDTH = /[\uFEFF\u200B\u200C\u200D\u2060]/g;
  const SPACES =
    /[\t\n\v\f\r\x1C-\x1F \x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]+/g;
  // NOT_TEXT is Python's: the control characters other than SPACES, the surrogates and the 66
  // noncharacters. A text holding one is read as blank, as Python reads it; `notText` says why.
  const NOT_TEXT =
    /[\x00-\x08\x0E-\x1B\x7F-\x84\x86-\x9F\uD800-\uDFFF\uFDD0-\uFDEF]|\p{Noncharacter_Code_Point}/u;
  function normalize(text) {
    if (NOT_TEXT.test(text)) return "";
    const spaced = text.replace(ZERO_WIDTH, "").normalize("NFC").replace(SPACES, " ");
    return spaced.replace(/^ | $/g, "");
  }
  // Python's `not_text`: "holds a control character U+0000 at character 4", or null for text.
  function notText(text) {
    let at = 0;
    for (const char of text) {
      at += 1; // (characters, not UTF-16 units, as Python counts them)
      if (!NOT_TEXT.test(char)) continue;
      const code = char.codePointAt(0);
      const kind = code >= 0xd800 && code <= 0xdfff ? "a surrogate"
        : code < 0xa0 ? "a control character" : "a noncharacter"; // prettier-ignore
      return `holds ${kind} U+${code.toString(16).toUpperCase().padStart(4, "0")} at character ${at}`;
    }
    return null;
  }

  class Tokenizer {
    constructor(json) {
      const model = JSON.parse(json).model; // the `tokenizers` file: vocab and merges
      this.vocab = new Map(Object.entries(model.vocab)); // piece -> id
      this.pieceOf = [];
      for (const [piece, id] of this.vocab) this.pieceOf[id] = piece;
      this.rank = new Map(); // "left right" -> the merge's rank (lower merges first)
      model.merges.forEach((pair, rank) => {
        const [left, right] = Array.isArray(pair) ? pair : pair.split(" ");
        this.rank.set(`${left} ${right}`, rank);
      });
    }

    // The parts that BPE works within: "▁Ein▁Hund," -> ["▁Ein", "▁Hund", ","].
    parts(text) {
      text = normalize(text);
      const normalized = text ? SPACE + text.replaceAll(" ", SPACE) : ""; // (as `tokenizers`)
      const parts = [];
      let current = "";
      for (const char of normalized) {
        // characters, not UTF-16 units
        if (char === SPACE || PUNCTUATION.test(char)) {
          if (current) parts.push(current);
          current = char;
          if (char !== SPACE) {
            parts.push(current); // punctuation stands alone
            current = "";
          }
        } else {
          current += char;
        }
      }
      if (current) parts.push(current);
      return parts;
    }

    // One part's pieces: start from characters, apply the best-ranked merge until none applies.
    merge(part) {
      const pieces = [];
      for (const char of part) {
        if (this.vocab.has(char)) pieces.push(char);
        else for (const byte of new TextEncoder().encode(char)) pieces.push(byteFallback(byte));
      }
      for (;;) {
        let best = -1;
        let bestRank = Infinity;
        for (let i = 0; i + 1 < pieces.length; i++) {
          const rank = this.rank.get(`${pieces[i]} ${pieces[i + 1]}`);
          if (rank !== undefined && rank < bestRank) [best, bestRank] = [i, rank];
        }
        if (best < 0) return pieces;
        pieces.splice(best, 2, pieces[best] + pieces[best + 1]);
      }
    }

    pieces(text) {
      return this.parts(text).flatMap((part) => this.merge(part));
    }

    // The ids the model reads: the pieces, then </s> (as Python's `Translator.encode`).
    encode(text) {
      return [...this.pieces(text).map((piece) => this.vocab.get(piece)), EOS];
    }

    // Pieces back to text: ▁ to a space, byte pieces to the characters they spell, and the
    // space in front dropped. Bytes that spell no character become U+FFFD, one per byte.
    detokenize(pieces) {
      let text = "";
      let bytes = [];
      const flush = () => {
        if (!bytes.length) return;
        try {
          text += new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(bytes));
        } catch {
          text += "\uFFFD".repeat(bytes.length);
        }
        bytes = [];
      };
      for (const piece of pieces) {
        const byte = /^<0x([0-9A-F]{2})>$/.exec(piece);
        if (byte) bytes.push(parseInt(byte[1], 16));
        else {
          flush();
          text += piece.replaceAll(SPACE, " ");
        }
      }
      flush();
      return text.startsWith(" ") ? text.slice(1) : text;
    }
  }

  function byteFallback(byte) {
    return `<0x${byte.toString(16).toUpperCase().padStart(2, "0")}>`;
  }

  // ---- 3. The model: encoder.onnx and decoder.onnx ---------------------------------------------
  // The graphs that `annotated-transformer export-onnx` writes. The encoder reads src (1, S) once;
  // the decoder reads the memory and the whole prefix of every live hypothesis, ys (beams, T), and
  // gives the next token's log-probabilities (beams, V) and its encoder-decoder attention
  // (beams, N, h, T, S).

  class Model {
    static async load(ort, encoderBytes, decoderBytes) {
      const options = { executionProviders: ["wasm"], graphOptimizationLevel: "all" };
      const model = new Model();
      model.ort = ort;
      model.encoder = await ort.InferenceSession.create(encoderBytes, options);
      model.decoder = await ort.InferenceSession.create(decoderBytes, options);
      return model;
    }

    mask(rows, S) {
      return new this.ort.Tensor("bool", new Uint8Array(rows * S).fill(1), [rows, 1, S]);
    }

    async encode(ids) {
      const S = ids.length;
      const src = new this.ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, S]);
      const out = await this.encoder.run({ src, src_mask: this.mask(1, S) });
      return out.memory; // (1, S, d_model)
    }

    // ys: the live prefixes, each an array of ids, all of one length T.
    async step(memory, ys) {
      const [, S, d] = memory.dims;
      const rows = ys.length;
      const T = ys[0].length;
      const copies = new Float32Array(rows * S * d); // the memory once per prefix
      for (let r = 0; r < rows; r++) copies.set(memory.data, r * S * d);
      const out = await this.decoder.run({
        memory: new this.ort.Tensor("float32", copies, [rows, S, d]),
        src_mask: this.mask(rows, S),
        ys: new this.ort.Tensor("int64", BigInt64Array.from(ys.flat(), BigInt), [rows, T]),
      });
      return { logProbs: out.log_probs.data, cross: out.cross }; // (rows·V), (rows, N, h, T, S)
    }
  }

  // ---- 4. Beam search: `simple_beam_search` of the chapter "Decoding" -------------------------
  // Keep the k best prefixes; at each step rank every extension of every prefix by its total
  // log-probability and keep the 2k best: an </s> among the k best finishes a hypothesis, scored
  // log P / lp with GNMT's lp = ((5 + t) / 6)^α; the k best that go on are the next prefixes.
  // Log-probabilities are added in float32 (a Float32Array rounds), as in PyTorch. One step may
  // finish several hypotheses, so the search can end holding more than k: like Python's, it
  // returns the n best (n_best = k here), never the ones that finished behind them.

  async function beamSearch(model, srcIds, { beamSize = 4, alpha = 0.6, maxLen, onStep,
    nBest = beamSize, memory } = {}) { // prettier-ignore
    const k = beamSize;
    memory = memory ?? (await model.encode(srcIds));
    let ys = [[BOS]]; // the live prefixes
    let scores = new Float32Array([0]); // their log P
    const finished = []; // {ids, score}
    for (let t = 1; t < maxLen; t++) {
      const { logProbs } = await model.step(memory, ys);
      const V = logProbs.length / ys.length;
      const total = new Float32Array(logProbs.length); // (beams·V): every extension
      for (let i = 0; i < total.length; i++) total[i] = scores[Math.floor(i / V)] + logProbs[i];
      const top = topK(total, Math.min(2 * k, total.length)); // the 2k best, best first
      const lp = ((5 + t) / 6) ** alpha;
      const extend = (i) => [...ys[Math.floor(i / V)], i % V];
      top.slice(0, k).forEach((i) => {
        if (i % V === EOS && Number.isFinite(total[i])) {
          finished.push({ ids: extend(i), score: total[i] / lp });
        }
      });
      const going = top.filter((i) => i % V !== EOS && Number.isFinite(total[i])).slice(0, k);
      ys = going.map(extend);
      scores = Float32Array.from(going, (i) => total[i]);
      const atLimit = t + 1 >= maxLen;
      if (atLimit) ys.forEach((ids, j) => finished.push({ ids, score: scores[j] / lp }));
      if (onStep) await onStep(t);
      if (atLimit || finished.length >= k || ys.length === 0) break;
    }
    return finished.sort((a, b) => b.score - a.score).slice(0, nBest); // stable, as `sorted`
  }

  // The indices of the n largest values, largest first (ties: the lower index first).
  function topK(values, n) {
    const best = []; // kept sorted, at most n long
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (best.length === n && !(v > values[best[n - 1]])) continue;
      let j = best.length;
      while (j > 0 && v > values[best[j - 1]]) j--;
      best.splice(j, 0, i);
      if (best.length > n) best.pop();
    }
    return best;
  }

  // Greedy decoding, `simple_greedy_decode` of the chapter "A first example": the most probable
  // next token (the first of equals, as `argmax`) until </s> or the limit.
  async function greedyDecode(model, srcIds, { maxLen, memory } = {}) {
    memory = memory ?? (await model.encode(srcIds));
    const ys = [BOS];
    for (let t = 1; t < maxLen; t++) {
      const { logProbs } = await model.step(memory, [ys]); // (1·V)
      let best = 0;
      for (let i = 1; i < logProbs.length; i++) if (logProbs[i] > logProbs[best]) best = i;
      ys.push(best);
      if (best === EOS) break;
    }
    return ys;
  }

  // §6.1: "maximum output length ... input length + 50" (export.json's extra_length), and never
  // past the model's max_len; the limit counts <s>.
  function outputLimit(srcLength, about) {
    return Math.min(srcLength + 1 + about.extra_length, about.max_len);
  }

  // ---- 5. The page ------------------------------------------------------------------------------
  // The chapter's page holds <div class="tryit" data-files="../_static/tryit/">; `start` fills it
  // with a form, loads the files, translates the sentence it opens with, then what the reader
  // types.

  const FILES = ["ort-wasm-simd-threaded.wasm", "ort-wasm-simd-threaded.mjs", "tokenizer.json",
    "encoder.onnx", "decoder.onnx", "export.json"]; // prettier-ignore
  const EXAMPLES = [
    "Ein Hund rennt durch den Schnee.",
    "Zwei Kinder spielen mit einem roten Ball am Strand.",
    "Eine Frau mit Sonnenbrille fährt auf einem Fahrrad durch die Stadt.",
    "Ein alter Mann sitzt auf einer Bank und füttert Tauben.",
    "Ich habe gestern meine Steuererklärung beim Finanzamt abgegeben.",
  ];
  // What the shipped model does outside image captions: its translation, beam 4, α 0.6
  // (tests/test_tryit.py checks it against Python's `Translator`).
  const CAPTIONS_ONLY = {
    german: "Meine Großmutter hat mir gestern einen langen Brief geschrieben.",
    english: "A grandmother has fallen up to do a long-filed white boots.",
  };
  const MAX_BEAM = 8;

  class InputError extends Error {} // what the reader typed cannot be translated: say why
  class Stale extends Error {} // newer input came while this translation ran: drop it

  // The files, as scripts; `onProgress(text)` hears how far the loading is.
  async function loadTranslator(folder, onProgress = () => {}) {
    const scripts = ["ort.wasm.min.js", ...FILES.map((name) => `${name}.js`)];
    await loadScript(`${folder}manifest.js`); // the scripts' sizes
    const total = scripts.reduce((sum, name) => sum + (sizes[name] || 0), 0);
    let bytes = 0;
    let count = 0;
    const loaded = (name) => {
      bytes += sizes[name] || 0;
      count += 1;
      const mb = (n) => (n / 1e6).toFixed(0);
      onProgress(total ? `Loading the model: ${mb(bytes)} of ${mb(total)} MB…`
        : `Loading the model: ${count} of ${scripts.length} files…`); // prettier-ignore
    };
    onProgress(`Loading the model: 0 of ${(total / 1e6).toFixed(0)} MB…`);
    await loadScript(`${folder}${scripts[0]}`).then(() => loaded(scripts[0])); // defines `ort`
    await Promise.all(scripts.slice(1).map((name) =>
      loadScript(`${folder}${name}`).then(() => loaded(name)))); // prettier-ignore
    onProgress("Loading the model: starting ONNX Runtime…");
    const ort = root.ort;
    ort.env.wasm.numThreads = 1; // one thread: no cross-origin isolation needed
    ort.env.wasm.wasmBinary = await assetBytes("ort-wasm-simd-threaded.wasm");
    const glue = await assetBytes("ort-wasm-simd-threaded.mjs"); // imported from memory
    const glueUrl = URL.createObjectURL(new Blob([glue], { type: "text/javascript" }));
    ort.env.wasm.wasmPaths = { mjs: glueUrl };
    const text = async (name) => new TextDecoder().decode(await assetBytes(name));
    const tokenizer = new Tokenizer(await text("tokenizer.json"));
    const about = JSON.parse(await text("export.json")); // max_len, extra_length, N, h, origin
    const encoder = await assetBytes("encoder.onnx");
    const model = await Model.load(ort, encoder, await assetBytes("decoder.onnx"));
    return { tokenizer, model, about };
  }

  // One translation, as Python's `Translator.translate(..., beam_size, alpha)` gives it, with its
  // n-best list, the greedy translation beside it, and the best hypothesis's encoder-decoder
  // attention.
  async function translate(translator, text, { beamSize = 4, alpha = 0.6, onStep } = {}) {
    const { tokenizer, model, about } = translator;
    if (notText(text)) throw new InputError(`Nothing to translate: this text ${notText(text)}.`);
    if (!normalize(text)) throw new InputError("Nothing to translate: type a German sentence.");
    const srcPieces = tokenizer.pieces(text);
    const srcIds = tokenizer.encode(text);
    if (srcIds.length > about.max_len) {
      throw new InputError(`This text has ${srcPieces.length} pieces; the model reads at most ` +
        `${about.max_len - 1}. Try a shorter one.`); // prettier-ignore
    }
    const started = performance.now();
    const maxLen = outputLimit(srcIds.length, about);
    const memory = await model.encode(srcIds); // (1, S, d_model), for all three passes
    const found = await beamSearch(model, srcIds, { beamSize, alpha, maxLen, onStep, memory });
    const spell = (ids) => {
      const end = ids.indexOf(EOS);
      const pieces = ids.slice(1, end < 0 ? ids.length : end).map((i) => tokenizer.pieceOf[i]);
      return { ids, pieces, text: tokenizer.detokenize(pieces) };
    };
    const nbest = found.map(({ ids, score }) => ({ ...spell(ids), score }));
    const greedy = spell(await greedyDecode(model, srcIds, { maxLen, memory }));
    const ms = performance.now() - started;
    const best = found[0].ids; // its attention: one teacher-forced pass, a row per output token
    const { cross } = await model.step(memory, [best.slice(0, -1)]);
    const tgtPieces = best.slice(1).map((i) => tokenizer.pieceOf[i]);
    return { text: nbest[0].text, nbest, greedy, srcPieces: [...srcPieces, "</s>"], tgtPieces,
      cross, ms }; // prettier-ignore
  }

  // The weights that the map shows, (T·S): one head's of one layer, or the mean of its heads.
  function headWeights(cross, layer, head) {
    const [, , h, T, S] = cross.dims; // (1, N, h, T, S)
    const heads = head === "mean" ? [...Array(h).keys()] : [Number(head)];
    const weights = new Float32Array(T * S);
    for (const one of heads) {
      const offset = (layer * h + one) * T * S; // cross[0, layer, one]: (T, S)
      for (let i = 0; i < T * S; i++) weights[i] += cross.data[offset + i] / heads.length;
    }
    return weights;
  }

  function element(tag, attributes = {}, ...children) {
    const node = document.createElement(tag);
    Object.assign(node, attributes);
    node.append(...children);
    return node;
  }

  const BLUE = [31, 119, 180];
  const shade = (weight) => `rgba(${BLUE.join(", ")}, ${weight.toFixed(3)})`;

  // The attention of one layer (one head, or the mean of the heads) as an SVG grid: a row per
  // output piece, a column per source piece, darker for more weight, with a colour scale;
  // hovering a row highlights it (book.css), and each cell's title gives its weight.
  function heatmap(result, layer, head, width) {
    const [T, S] = result.cross.dims.slice(3); // (1, N, h, T, S)
    const weights = headWeights(result.cross, layer, head);
    const label = (piece) => piece.replaceAll(SPACE, "_");
    const longest = (pieces) => Math.max(...pieces.map((piece) => label(piece).length));
    const left = 34 + 7 * longest(result.tgtPieces); // the output pieces and their axis title
    const top = 34 + 6 * longest(result.srcPieces); // the source pieces, upwards, and their title
    const scale = 70; // the colour scale, right of the grid
    const cell = Math.max(12, Math.min(22, Math.floor((width - left - scale) / S)));
    const svgNS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(svgNS, "svg");
    const bar = Math.max(T * cell, 100); // the colour scale's height
    svg.setAttribute("width", left + S * cell + scale);
    svg.setAttribute("height", top + bar + 10);
    svg.setAttribute("class", "tryit-heatmap");
    const add = (tag, attributes, text, parent = svg) => {
      const node = document.createElementNS(svgNS, tag);
      for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
      if (text !== undefined) node.textContent = text;
      parent.appendChild(node);
      return node;
    };
    const title = { class: "tryit-axis", "text-anchor": "middle" };
    add("text", { ...title, x: left + (S * cell) / 2, y: 14 }, "source pieces (the input)");
    const middle = top + (T * cell) / 2;
    add("text", { ...title, x: 14, y: middle, transform: `rotate(-90 14 ${middle})` },
      "output pieces (the translation)"); // prettier-ignore
    result.srcPieces.forEach((piece, j) => {
      const x = left + j * cell + cell / 2 + 3;
      add("text", { x, y: top - 6, transform: `rotate(-60 ${x} ${top - 6})` }, label(piece));
    });
    for (let i = 0; i < T; i++) {
      const row = add("g", { class: "row" });
      add("text", { x: left - 6, y: top + i * cell + cell / 2 + 4, "text-anchor": "end" },
        label(result.tgtPieces[i]), row); // prettier-ignore
      for (let j = 0; j < S; j++) {
        const weight = weights[i * S + j];
        const rect = add("rect", { x: left + j * cell, y: top + i * cell,
          style: `width: ${cell - 1}px; height: ${cell - 1}px`, // (the theme's CSS sets widths)
          fill: shade(weight), "data-weight": weight }, undefined, row); // prettier-ignore
        add("title", {}, `${label(result.tgtPieces[i])} ← ${label(result.srcPieces[j])}: ` +
          weight.toFixed(3), rect); // prettier-ignore
      }
    }
    // The colour scale: weight 0 (white) at the bottom to 1 at the top, as the cells are shaded.
    const x = left + S * cell + 14;
    const gradient = add("linearGradient", { id: "tryit-scale", x1: 0, y1: 1, x2: 0, y2: 0 },
      undefined, add("defs", {})); // prettier-ignore
    add("stop", { offset: 0, "stop-color": shade(0) }, undefined, gradient);
    add("stop", { offset: 1, "stop-color": shade(1) }, undefined, gradient);
    add("rect", { x, y: top, class: "tryit-scale", fill: "url(#tryit-scale)", stroke: "#888",
      style: `width: 12px; height: ${bar}px` }); // prettier-ignore
    add("text", { x: x - 4, y: top - 10 }, "weight");
    for (const tick of [0, 0.5, 1]) {
      const y = top + (1 - tick) * bar;
      add("line", { x1: x + 12, x2: x + 16, y1: y, y2: y, stroke: "#888" });
      add("text", { x: x + 18, y: y + 4 }, String(tick));
    }
    return svg;
  }

  // The pieces BPE cuts the input into (chapter "Subwords"), ▁ marking a word's start.
  function showPieces(parts, pieces) {
    parts.pieces.replaceChildren(`the input's ${pieces.length} pieces: `,
      ...pieces.map((piece) => element("span", { className: "tryit-piece", textContent: piece })),
      " and </s>"); // prettier-ignore
  }

  function showResult(parts, result, { beamSize, alpha }) {
    parts.greedy.textContent = result.greedy.text || "(nothing: </s> first)";
    parts.output.textContent = result.text || "(nothing: </s> first)";
    parts.beamTitle.textContent = `beam search, k = ${beamSize}, α = ${alpha}`;
    // The k hypotheses that the search returns, as Python's does, best first. One may be empty:
    // </s> was among the k most probable first tokens. It gets a line below, not a blank row.
    const rank = (hypothesis) => result.nbest.indexOf(hypothesis) + 1;
    const listed = result.nbest.filter((hypothesis) => hypothesis.text.trim());
    parts.nbest.replaceChildren(element("tr", {}, element("th", { textContent: "#" }),
      element("th", { textContent: `the ${listed.length} hypotheses beam search finished and ` +
        "kept, best first" }), // prettier-ignore
      element("th", { textContent: "score (log P / lp)" }))); // prettier-ignore
    for (const hypothesis of listed) {
      parts.nbest.append(element("tr", {}, element("td", { textContent: rank(hypothesis) }),
        element("td", { textContent: hypothesis.text }),
        element("td", { textContent: hypothesis.score.toFixed(4) }))); // prettier-ignore
    }
    const empty = result.nbest.filter((hypothesis) => !hypothesis.text.trim());
    parts.empty.textContent = empty.map((hypothesis) => "Not listed: the empty translation " +
      `(</s> as the first token), number ${rank(hypothesis)}, score ` +
      `${hypothesis.score.toFixed(4)}.`).join(" "); // prettier-ignore
    const draw = () => parts.map.replaceChildren(heatmap(result, Number(parts.layer.value),
      parts.head.value, parts.map.clientWidth || 760)); // prettier-ignore
    parts.layer.onchange = draw;
    parts.head.onchange = draw;
    draw();
  }

  function options(count, name) {
    return Array.from({ length: count }, (_, i) =>
      element("option", { value: i, textContent: `${name} ${i + 1}` }));
  }

  // The settings as numbers, or a message beside each field that is wrong.
  function readSettings(parts) {
    const beamSize = Number(parts.beam.value);
    const alpha = Number(parts.alpha.value);
    const beamWrong = !Number.isInteger(beamSize) || beamSize < 1 || beamSize > MAX_BEAM;
    const alphaWrong = !parts.alpha.value.trim() || !(alpha >= 0) || !Number.isFinite(alpha);
    for (const [field, wrong, message] of [
      [parts.beam, beamWrong, `beam size must be a whole number from 1 to ${MAX_BEAM}`],
      [parts.alpha, alphaWrong, "α must be a number ≥ 0 (the paper's is 0.6)"],
    ]) {
      field.classList.toggle("tryit-wrong", wrong);
      field.nextElementSibling.textContent = wrong ? message : "";
    }
    return beamWrong || alphaWrong ? null : { beamSize, alpha };
  }

  const STYLE = `
    .tryit .tryit-field-error { color: #b42318; font-weight: bold; font-size: 0.85rem; }
    .tryit .tryit-field-error:not(:empty) { margin: 0 0.8rem 0 0.2rem; }
    .tryit input.tryit-wrong { outline: 2px solid #b42318; }
    .tryit .tryit-hint, .tryit .tryit-note, .tryit .tryit-label { color: #57606a;
      font-size: 0.85rem; }
    .tryit .tryit-note { margin: 0.4rem 0; }
    .tryit .tryit-pieces { font-size: 0.85rem; margin: 0.3rem 0; }
    .tryit .tryit-piece { font-family: monospace; background: #eef3f8; border-radius: 0.2rem;
      padding: 0 0.2rem; margin: 0.1rem; white-space: pre; display: inline-block; }
    .tryit .tryit-outputs { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
    .tryit .tryit-outputs p { margin: 0.1rem 0 0.6rem 0; }
    .tryit p.tryit-greedy { font-size: 1.25rem; }
    .tryit svg.tryit-heatmap text.tryit-axis { font-size: 12px; font-weight: bold; }`;

  async function start(container) {
    const parts = {
      input: element("textarea", { rows: 2, value: EXAMPLES[0], className: "tryit-input",
        title: "German text" }), // prettier-ignore
      go: element("button", { textContent: "Translate", className: "tryit-go", disabled: true }),
      beam: element("input", { type: "number", min: 1, max: MAX_BEAM, value: 4,
        title: "beam size" }), // prettier-ignore
      alpha: element("input", { type: "number", min: 0, step: 0.1, value: 0.6, title: "α" }),
      status: element("p", { className: "tryit-status", textContent: "Loading the model…" }),
      pieces: element("div", { className: "tryit-pieces" }),
      greedy: element("p", { className: "tryit-greedy" }),
      beamTitle: element("div", { className: "tryit-label" }),
      output: element("p", { className: "tryit-output" }),
      nbest: element("table", { className: "tryit-nbest" }),
      empty: element("p", { className: "tryit-label tryit-empty" }),
      layer: element("select", { title: "layer" }),
      head: element("select", { title: "head" }),
      map: element("div", { className: "tryit-map" }),
    };
    const error = () => element("span", { className: "tryit-field-error" });
    const examples = EXAMPLES.map((text) => element("button", { textContent: text,
      className: "tryit-example", onclick: () => { parts.input.value = text; request(); } }),
    ); // prettier-ignore
    container.replaceChildren(element("style", { textContent: STYLE }), parts.input,
      element("div", {}, ...examples),
      element("p", { className: "tryit-note", textContent: "The model learned from image " +
        "captions only (Multi30k): people, animals, scenes. Elsewhere it makes things up: " +
        `„${CAPTIONS_ONLY.german}“ → “${CAPTIONS_ONLY.english}”` }), // prettier-ignore
      element("div", { className: "tryit-settings" }, parts.go, " beam size ", parts.beam,
        error(), " α ", parts.alpha, error(),
        element("span", { className: "tryit-hint", textContent: " It translates when you pause " +
          "typing; Ctrl+Enter in the text, or Enter in a field, at once." })), // prettier-ignore
      parts.status, parts.pieces,
      element("div", { className: "tryit-outputs" },
        element("div", {}, element("div", { className: "tryit-label",
          textContent: "greedy decoding" }), parts.greedy),
        element("div", {}, parts.beamTitle, parts.output)), // prettier-ignore
      parts.nbest, parts.empty,
      element("div", {}, "encoder–decoder attention of the best hypothesis: ", parts.layer, " ",
        parts.head), parts.map); // prettier-ignore
    const status = (text, failed = false) => {
      parts.status.textContent = text;
      parts.status.classList.toggle("tryit-error", failed);
    };
    const clear = () => {
      for (const shown of [parts.greedy, parts.output, parts.nbest, parts.empty, parts.map]) {
        shown.replaceChildren();
      }
    };
    let translator;
    let busy = false;
    let pending = null; // a request that came while the model loaded or translated: {quiet}
    let latest = 0; // the newest input or request; a translation begun before it is stale
    let pause; // the timer that translates once the typing pauses
    const run = async (text, settings) => {
      const ticket = ++latest;
      const stale = () => ticket !== latest;
      busy = true;
      parts.go.disabled = true;
      try {
        const result = await translate(translator, text, { ...settings, onStep: (t) => {
          if (stale()) throw new Stale(); // stop searching: newer input waits
          status(`Searching… step ${t}`);
          return nextFrame();
        } }); // prettier-ignore
        if (stale()) throw new Stale();
        showResult(parts, result, settings);
        showPieces(parts, result.srcPieces.slice(0, -1));
        status(`Translated in ${Math.round(result.ms)} ms (beam size ${settings.beamSize}, ` +
          `α ${settings.alpha}; greedy beside it).`); // prettier-ignore
        return result;
      } catch (error) {
        if (error instanceof Stale) return null; // (what it showed stays until the newer one)
        status(error instanceof InputError ? error.message : `Error: ${error.message}`, true);
        parts.pieces.replaceChildren();
        clear();
        throw error;
      } finally {
        busy = false;
        parts.go.disabled = false;
        if (pending) request(pending);
      }
    };
    // Translate what the box holds, with the settings, once the model is there and free. A
    // `quiet` request (the typing paused) clears the outputs of an empty box instead of saying
    // "Nothing to translate", which the button and Ctrl+Enter still say. Returns the translation
    // it starts (a promise), if it starts one now.
    function request({ quiet = false } = {}) {
      clearTimeout(pause);
      const settings = readSettings(parts);
      if (!settings) return;
      if (quiet && !normalize(parts.input.value)) {
        latest += 1; // (a translation still running is stale)
        clear();
        status("");
        return;
      }
      pending = !translator || busy ? { quiet } : null;
      if (pending) latest += 1; // the running one is stale: it stops, then this one runs
      else return run(parts.input.value, settings).catch(() => null);
      return null;
    }
    parts.go.onclick = () => request();
    // As the reader types: a translation begun before the keystroke is stale, and the page
    // translates once no key came for `api.typingPause` ms.
    parts.input.addEventListener("input", () => {
      latest += 1;
      clearTimeout(pause);
      pause = setTimeout(() => request({ quiet: true }), api.typingPause);
    });
    parts.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        request();
      }
    });
    for (const field of [parts.beam, parts.alpha]) {
      field.addEventListener("keydown", (event) => {
        if (event.key === "Enter") {
          event.preventDefault();
          request();
        }
      });
    }
    try {
      const started = performance.now();
      translator = await loadTranslator(container.dataset.files, status);
      parts.layer.replaceChildren(...options(translator.about.N, "layer"));
      parts.layer.value = translator.about.N - 1; // the last layer: its heads say the most
      parts.head.replaceChildren(element("option", { value: "mean", textContent: "mean of heads" }),
        ...options(translator.about.h, "head")); // prettier-ignore
      status(`Model loaded in ${Math.round(performance.now() - started)} ms.`);
    } catch (error) {
      status(`The model could not be loaded: ${error.message}`, true);
      throw error;
    }
    const shownPieces = () => showPieces(parts, translator.tokenizer.pieces(parts.input.value));
    parts.input.addEventListener("input", shownPieces);
    shownPieces();
    parts.go.disabled = false;
    // The sentence in the box is translated as soon as the model is there, no key pressed (or
    // what the reader asked for while it loaded).
    await request(pending ?? { quiet: true });
    return { translator, run };
  }

  function nextFrame() {
    return new Promise((resolve) => setTimeout(resolve, 0)); // let the page draw between steps
  }

  // typingPause: how long after the last keystroke the page translates on its own, in ms (about
  // half a second, as the translators people know wait; the tests set it).
  const api = { BOS, EOS, addAsset, addManifest, assetBytes, loadScript, normalize, notText,
    Tokenizer, Model, beamSearch, greedyDecode, topK, outputLimit, translate, headWeights, InputError,
    CAPTIONS_ONLY, typingPause: 500 }; // prettier-ignore
  if (typeof module === "object" && module.exports) module.exports = api;
  else root.TryIt = api;
  if (typeof document !== "undefined") {
    // TryIt.ready: the page's `run(text, settings)`, once the model is loaded and the box's
    // sentence translated (the tests wait for it).
    const container = document.querySelector(".tryit");
    if (container) api.ready = start(container);
  }
})(typeof self !== "undefined" ? self : this);
