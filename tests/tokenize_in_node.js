// Run by tests/test_tryit.py: the page's tokenizer (book/_static/tryit.js) in Node.
// stdin: {"tokenizer": the tokenizers JSON text, "texts": [...], "pieces": [[...], ...]}
// (and optionally "normalize": [...])
// stdout: {"pieces": the pieces of each text, "texts": the text that each given list spells,
//          "normalized": each text of "normalize" as the page's `normalize` gives it,
//          "notText": what the page's `notText` says of each, null for text}
const path = require("node:path");
const TryIt = require(path.join(__dirname, "..", "book", "_static", "tryit.js"));

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const job = JSON.parse(input);
  const tokenizer = new TryIt.Tokenizer(job.tokenizer);
  const result = {
    pieces: job.texts.map((text) => tokenizer.pieces(text)),
    texts: job.pieces.map((pieces) => tokenizer.detokenize(pieces)),
    normalized: (job.normalize || []).map((text) => TryIt.normalize(text)),
    notText: (job.normalize || []).map((text) => TryIt.notText(text)),
  };
  process.stdout.write(JSON.stringify(result));
});
