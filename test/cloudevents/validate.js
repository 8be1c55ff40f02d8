// Validates CloudEvents 1.0 JSON envelopes, one per line of the file given,
// with the official JavaScript SDK (module path in CLOUDEVENTS_SDK, else
// "cloudevents"): its strict constructor checks every attribute (source as a
// uri-reference, a non-empty subject, extension names).  Prints one line per
// rejected envelope and "valid N of M"; exits 1 if any was rejected.
const fs = require("fs");
const { CloudEvent } = require(process.env.CLOUDEVENTS_SDK || "cloudevents");

const lines = fs.readFileSync(process.argv[2], "utf8").split("\n").filter((l) => l.length > 0);
let valid = 0;
for (const line of lines) {
    try {
        new CloudEvent(JSON.parse(line), true);
        valid++;
    } catch (e) {
        console.log("rejected: " + line + "\n  " + (e.errors ? JSON.stringify(e.errors) : e.message));
    }
}
console.log("valid " + valid + " of " + lines.length);
process.exit(valid === lines.length ? 0 : 1);
