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

  function addAsset(name, base64) {
    assets[name] = base64;
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
  // Python's `BPETokenizer` (Hugging Face `tokenizers`), step by step: put ▁ before the text and
  // for every space; split before each ▁ and around each punctuation character; within each part,
  // merge neighbouring pieces in the order the merges were learned; a character the vocabulary
  // lacks becomes its UTF-8 bytes, one piece each.

  const PUNCTUATION = /^[\p{P}!-\/:-@\[-`{-~]$/u; // Unicode punctuation, and ASCII's symbols

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
  // Log-probabilities are added in float32 (a Float32Array rounds), as in PyTorch.

  async function beamSearch(model, srcIds, { beamSize = 4, alpha = 0.6, maxLen, onStep } = {}) {
    const k = beamSize;
    const memory = await model.encode(srcIds);
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
    return finished.sort((a, b) => b.score - a.score); // stable, as Python's sorted
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

  // §6.1: "maximum output length ... input length + 50" (export.json's extra_length), and never
  // past the model's max_len; the limit counts <s>.
  function outputLimit(srcLength, about) {
    return Math.min(srcLength + 1 + about.extra_length, about.max_len);
  }

  // ---- 5. The page ------------------------------------------------------------------------------
  // The chapter's page holds <div class="tryit" data-files="../_static/tryit/">; `start` fills it
  // with a form, loads the files, and translates what the reader types.

  const FILES = ["ort-wasm-simd-threaded.wasm", "ort-wasm-simd-threaded.mjs", "tokenizer.json",
    "encoder.onnx", "decoder.onnx", "export.json"]; // prettier-ignore
  const EXAMPLES = [
    "Ein Hund rennt durch den Schnee.",
    "Zwei Kinder spielen mit einem roten Ball am Strand.",
    "Eine Frau mit Sonnenbrille fährt auf einem Fahrrad durch die Stadt.",
    "Ein alter Mann sitzt auf einer Bank und füttert Tauben.",
    "Ich habe gestern meine Steuererklärung beim Finanzamt abgegeben.",
  ];

  class InputError extends Error {} // what the reader typed cannot be translated: say why

  async function loadTranslator(folder) {
    await loadScript(`${folder}ort.wasm.min.js`); // onnxruntime-web: defines `ort`
    await Promise.all(FILES.map((name) => loadScript(`${folder}${name}.js`)));
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
  // n-best list and the best hypothesis's encoder-decoder attention.
  async function translate(translator, text, { beamSize = 4, alpha = 0.6, onStep } = {}) {
    const { tokenizer, model, about } = translator;
    if (!text.trim()) throw new InputError("Nothing to translate: type a German sentence.");
    const srcPieces = tokenizer.pieces(text);
    const srcIds = tokenizer.encode(text);
    if (srcIds.length > about.max_len) {
      throw new InputError(`This text has ${srcPieces.length} pieces; the model reads at most ` +
        `${about.max_len - 1}. Try a shorter one.`); // prettier-ignore
    }
    const started = performance.now();
    const maxLen = outputLimit(srcIds.length, about);
    const found = await beamSearch(model, srcIds, { beamSize, alpha, maxLen, onStep });
    const ms = performance.now() - started;
    const nbest = found.map(({ ids, score }) => {
      const end = ids.indexOf(EOS);
      const pieces = ids.slice(1, end < 0 ? ids.length : end).map((i) => tokenizer.pieceOf[i]);
      return { ids, pieces, text: tokenizer.detokenize(pieces), score };
    });
    const best = found[0].ids; // its attention: one teacher-forced pass, a row per output token
    const { cross } = await model.step(await model.encode(srcIds), [best.slice(0, -1)]);
    const tgtPieces = best.slice(1).map((i) => tokenizer.pieceOf[i]);
    return { text: nbest[0].text, nbest, srcPieces: [...srcPieces, "</s>"], tgtPieces, cross, ms };
  }

  function element(tag, attributes = {}, ...children) {
    const node = document.createElement(tag);
    Object.assign(node, attributes);
    node.append(...children);
    return node;
  }

  // The attention of one layer and head as an SVG grid: a row per output piece, a column per
  // source piece, darker for more weight; hovering a row highlights it (book.css), and each
  // cell's title gives its weight.
  function heatmap(result, layer, head) {
    const [h, T, S] = result.cross.dims.slice(2); // (1, N, h, T, S)
    const cell = 22;
    const left = 110;
    const top = 90;
    const svgNS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(svgNS, "svg");
    svg.setAttribute("width", left + S * cell + 10);
    svg.setAttribute("height", top + T * cell + 10);
    svg.setAttribute("class", "tryit-heatmap");
    const add = (tag, attributes, text) => {
      const node = document.createElementNS(svgNS, tag);
      for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
      if (text !== undefined) node.textContent = text;
      svg.appendChild(node);
      return node;
    };
    const label = (piece) => piece.replaceAll(SPACE, "_");
    result.srcPieces.forEach((piece, j) => {
      const x = left + j * cell + cell / 2;
      add("text", { x, y: top - 6, transform: `rotate(-60 ${x} ${top - 6})` },
        label(piece)); // prettier-ignore
    });
    const offset = ((layer * h + head) * T) * S; // cross[0, layer, head]: (T, S)
    for (let i = 0; i < T; i++) {
      const row = add("g", { class: "row" });
      const name = add("text", { x: left - 6, y: top + i * cell + 15, "text-anchor": "end" },
        label(result.tgtPieces[i])); // prettier-ignore
      row.appendChild(name);
      for (let j = 0; j < S; j++) {
        const weight = result.cross.data[offset + i * S + j];
        const rect = add("rect", { x: left + j * cell, y: top + i * cell,
          style: `width: ${cell - 1}px; height: ${cell - 1}px`, // (the theme's CSS sets widths)
          fill: `rgba(31, 119, 180, ${weight.toFixed(3)})` }); // prettier-ignore
        rect.appendChild(document.createElementNS(svgNS, "title")).textContent =
          `${label(result.tgtPieces[i])} ← ${label(result.srcPieces[j])}: ${weight.toFixed(3)}`;
        row.appendChild(rect);
      }
    }
    return svg;
  }

  function showResult(parts, result) {
    parts.output.textContent = result.text;
    parts.nbest.replaceChildren(element("tr", {}, element("th", { textContent: "hypothesis" }),
      element("th", { textContent: "score (log P / lp)" }))); // prettier-ignore
    for (const hypothesis of result.nbest) {
      parts.nbest.append(element("tr", {}, element("td", { textContent: hypothesis.text }),
        element("td", { textContent: hypothesis.score.toFixed(4) }))); // prettier-ignore
    }
    const draw = () => parts.map.replaceChildren(
      heatmap(result, Number(parts.layer.value), Number(parts.head.value)));
    parts.layer.onchange = draw;
    parts.head.onchange = draw;
    draw();
  }

  function options(count, name) {
    return Array.from({ length: count }, (_, i) =>
      element("option", { value: i, textContent: `${name} ${i + 1}` }));
  }

  async function start(container) {
    const parts = {
      input: element("textarea", { rows: 2, value: EXAMPLES[0], className: "tryit-input" }),
      go: element("button", { textContent: "Translate", className: "tryit-go", disabled: true }),
      beam: element("input", { type: "number", min: 1, max: 8, value: 4, title: "beam size" }),
      alpha: element("input", { type: "number", min: 0, step: 0.1, value: 0.6, title: "α" }),
      status: element("p", { className: "tryit-status", textContent: "Loading the model…" }),
      output: element("p", { className: "tryit-output" }),
      nbest: element("table", { className: "tryit-nbest" }),
      layer: element("select"),
      head: element("select"),
      map: element("div", { className: "tryit-map" }),
    };
    const examples = EXAMPLES.map((text) => element("button", { textContent: text,
      className: "tryit-example", onclick: () => { parts.input.value = text; } })); // prettier-ignore
    container.replaceChildren(parts.input, element("div", {}, ...examples),
      element("div", { className: "tryit-settings" }, parts.go, " beam size ", parts.beam,
        " α ", parts.alpha), parts.status, parts.output, parts.nbest,
      element("div", {}, "encoder–decoder attention: ", parts.layer, " ", parts.head), parts.map);
    const status = (text, error = false) => {
      parts.status.textContent = text;
      parts.status.classList.toggle("tryit-error", error);
    };
    let translator;
    try {
      const started = performance.now();
      translator = await loadTranslator(container.dataset.files);
      parts.layer.replaceChildren(...options(translator.about.N, "layer"));
      parts.head.replaceChildren(...options(translator.about.h, "head"));
      status(`Model loaded in ${Math.round(performance.now() - started)} ms.`);
    } catch (error) {
      status(`The model could not be loaded: ${error.message}`, true);
      throw error;
    }
    const run = async (text, settings) => {
      parts.go.disabled = true;
      try {
        const result = await translate(translator, text, { ...settings,
          onStep: (t) => { status(`Searching… step ${t}`); return nextFrame(); } }); // prettier-ignore
        showResult(parts, result);
        status(`Translated in ${Math.round(result.ms)} ms (beam size ${settings.beamSize}, ` +
          `α ${settings.alpha}).`); // prettier-ignore
        return result;
      } catch (error) {
        status(error instanceof InputError ? error.message : `Error: ${error.message}`, true);
        for (const shown of [parts.output, parts.nbest, parts.map]) shown.replaceChildren();
        throw error;
      } finally {
        parts.go.disabled = false;
      }
    };
    parts.go.onclick = () => {
      const beamSize = Number(parts.beam.value);
      const alpha = Number(parts.alpha.value);
      if (!Number.isInteger(beamSize) || beamSize < 1 || beamSize > 8 || !(alpha >= 0)) {
        status("The beam size must be a whole number from 1 to 8, and α at least 0.", true);
        return;
      }
      run(parts.input.value, { beamSize, alpha }).catch(() => {});
    };
    parts.go.disabled = false;
    return { translator, run };
  }

  function nextFrame() {
    return new Promise((resolve) => setTimeout(resolve, 0)); // let the page draw between steps
  }

  const api = { BOS, EOS, addAsset, assetBytes, loadScript, Tokenizer, Model, beamSearch,
    topK, outputLimit, translate, InputError };
  if (typeof module === "object" && module.exports) module.exports = api;
  else root.TryIt = api;
  if (typeof document !== "undefined") {
    // The tests wait for TryIt.ready, the page's `run(text, settings)`.
    const container = document.querySelector(".tryit");
    if (container) api.ready = start(container);
  }
})(typeof self !== "undefined" ? self : this);
