// guard: a transform that rejects sends lacking a required property and
// masks JSON string fields of the body before it is stored. Its config is
// space-separated settings:
//
//   require=KEYS,tenant   properties every message must carry
//   mask=card,email       JSON fields (of any object) whose string values are masked
//   keep=4                characters left unmasked at the end of each value
//
// A masked message gets property MASKED=true; one without the fields is
// stored as sent. Compressed bodies are not masked.
import {
  TransformMessage, registerTransform, onInit, setVersion, addTransformTest, wantStored, wantRejected, wantChanged,
} from "../../../../sdk/assemblyscript/assembly/index";
export * from "../../../../sdk/assemblyscript/assembly/exports/transform";

let required: string[] = [];
let masked: string[] = [];
let keep: i32 = 4;

function configure(config: string): string | null {
  const parts = config.split(" ");
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i].trim();
    if (p.length == 0) continue;
    const eq = p.indexOf("=");
    if (eq <= 0) return "bad setting '" + p + "': want name=value";
    const name = p.substring(0, eq);
    const value = p.substring(eq + 1);
    if (name == "require") required = value.split(",").filter((s: string) => s.length > 0);
    else if (name == "mask") masked = value.split(",").filter((s: string) => s.length > 0);
    else if (name == "keep") {
      const n = parseInt(value, 10);
      if (isNaN(n) || n < 0 || n > 1024) return "bad keep '" + value + "': want a count";
      keep = <i32>n;
    } else return "unknown setting '" + name + "'";
  }
  addTests();
  return null;
}

// addTests adds the self-tests that follow from the config: a message
// lacking the first required property is rejected, and one carrying them
// all with the first masked field in its body comes out masked.
function addTests(): void {
  const props: string[] = [];
  for (let i = 0; i < required.length; i++) {
    props.push(required[i]);
    props.push("x");
  }
  if (required.length > 0) {
    addTransformTest("without " + required[0], "T", [], "{}", wantRejected("missing property " + required[0]));
  }
  if (masked.length == 0) {
    addTransformTest("with every required property", "T", props, "{}", wantStored());
    return;
  }
  const value = "1234567890";
  const k = keep < value.length ? keep : value.length;
  const field = "{\"" + masked[0] + "\":\"";
  if (k == value.length) {
    addTransformTest(masked[0] + " kept whole", "T", props, field + value + "\"}", wantStored());
    return;
  }
  const want = props.slice(0);
  want.push("MASKED");
  want.push("true");
  const maskedValue = "*".repeat(value.length - k) + value.substring(value.length - k);
  addTransformTest(masked[0] + " masked", "T", props, field + value + "\"}", wantChanged("", want, field + maskedValue + "\"}"));
}

function isSpace(c: u8): bool {
  return c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d;
}

// maskField masks, in place, the string value of every "field": in b, and
// reports whether it masked any.
function maskField(b: Uint8Array, field: string): bool {
  const key = Uint8Array.wrap(String.UTF8.encode("\"" + field + "\""));
  let changed = false;
  for (let i = 0; i + key.length <= b.length; i++) {
    let j = 0;
    while (j < key.length && b[i + j] == key[j]) j++;
    if (j < key.length) continue;
    // A key follows '{' or ',' (after spaces) and precedes ':'.
    let before = i - 1;
    while (before >= 0 && isSpace(b[before])) before--;
    if (before < 0 || (b[before] != 0x7b && b[before] != 0x2c)) continue;
    let at = i + key.length;
    while (at < b.length && isSpace(b[at])) at++;
    if (at >= b.length || b[at] != 0x3a) continue;
    at++;
    while (at < b.length && isSpace(b[at])) at++;
    if (at >= b.length || b[at] != 0x22) continue;
    const start = at + 1;
    let end = start;
    let escaped = false;
    while (end < b.length && b[end] != 0x22) {
      if (b[end] == 0x5c) {
        escaped = true;
        end++;
      }
      end++;
    }
    if (end >= b.length) return changed;
    // Values with escapes are masked whole, so no escape is cut in half.
    const upto = escaped ? end : end - keep;
    for (let k = start; k < upto; k++) b[k] = 0x2a;
    if (upto > start) changed = true;
    i = end;
  }
  return changed;
}

function guard(m: TransformMessage): void {
  for (let i = 0; i < required.length; i++) {
    if (m.property(required[i]) == null) {
      m.reject("missing property " + required[i]);
      return;
    }
  }
  if (masked.length == 0 || m.compressed()) return;
  const b = m.body();
  let changed = false;
  for (let i = 0; i < masked.length; i++) {
    if (maskField(b, masked[i])) changed = true;
  }
  if (changed) {
    m.setBody(b);
    m.setProperty("MASKED", "true");
  }
}

setVersion("1.0.0");
onInit(configure);
registerTransform(guard);
