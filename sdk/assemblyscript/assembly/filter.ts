// The filter kind: broker_filter over a batch of records (docs/plugins.md,
// "Filter batch").
import {
  addKind, addFlags, addSelfTest, fail, findProperty, packPtrLen, KIND_FILTER, FLAG_FILTER_BODY, FLAG_FILTER_BODY_INFLATED,
  STATUS_OK, STATUS_BAD_INPUT, STATUS_BAD_EXPRESSION, STATUS_FAILED, STATUS_NOT_IMPLEMENTED,
} from "./abi";

const FILTER_NO_MATCH: u8 = 1;
const FILTER_MATCH: u8 = 2;
const RECORD_HEADER_LEN: i32 = 52;
const BODY_ABSENT: u32 = 0xffffffff;
const MAX_EXPRESSION_LEN: u32 = 4096;
const MAX_FILTER_KEYS: i32 = 64;

/** One stored message as a filter sees it: a view valid during match. */
export class FilterMessage {
  ptr: usize = 0;
  queueId: i32 = 0;
  queueOffset: i64 = 0;
  bornTimestamp: i64 = 0;
  storeTimestamp: i64 = 0;
  reconsumeTimes: i32 = 0;
  sysFlag: i32 = 0;
  topicPtr: usize = 0;
  topicLen: i32 = 0;
  tagsPtr: usize = 0;
  tagsLen: i32 = 0;
  keysPtr: usize = 0;
  keysLen: i32 = 0;
  propsPtr: usize = 0;
  propsLen: i32 = 0;
  bodyPtr: usize = 0;
  bodyLen: i32 = -1;

  /** The message's topic. */
  topic(): string {
    return String.UTF8.decodeUnsafe(this.topicPtr, <usize>this.topicLen);
  }
  /** The TAGS property, "" when absent. */
  tags(): string {
    return String.UTF8.decodeUnsafe(this.tagsPtr, <usize>this.tagsLen);
  }
  /** The KEYS property, space-separated. */
  keys(): string {
    return String.UTF8.decodeUnsafe(this.keysPtr, <usize>this.keysLen);
  }
  /** Whether the tag equals t (bytes compared, no allocation). */
  tagIs(t: ArrayBuffer): bool {
    return this.tagsLen == t.byteLength && memory.compare(this.tagsPtr, changetype<usize>(t), <usize>this.tagsLen) == 0;
  }
  /** Whether key k is one of the message's keys. */
  hasKey(k: ArrayBuffer): bool {
    const n = k.byteLength;
    let i = 0;
    while (i <= this.keysLen) {
      let end = i;
      while (end < this.keysLen && load<u8>(this.keysPtr + end) != 0x20) end++;
      if (end - i == n && memory.compare(this.keysPtr + i, changetype<usize>(k), <usize>n) == 0) return true;
      i = end + 1;
    }
    return false;
  }
  /** A user property's value, or null when the message has none. */
  property(name: string): string | null {
    const at = findProperty(this.propsPtr, this.propsLen, String.UTF8.encode(name));
    if (at < 0) return null;
    return String.UTF8.decodeUnsafe(this.propsPtr + <usize>(at >>> 32), <usize>(<u32>at));
  }
  /** Whether property name (UTF-8 bytes) has value value (UTF-8 bytes). */
  propertyIs(name: ArrayBuffer, value: ArrayBuffer): bool {
    const at = findProperty(this.propsPtr, this.propsLen, name);
    if (at < 0) return false;
    const n = <i32>(<u32>at);
    return n == value.byteLength && memory.compare(this.propsPtr + <usize>(at >>> 32), changetype<usize>(value), <usize>n) == 0;
  }
  /** Whether the body was sent (see wantBodies). */
  hasBody(): bool {
    return this.bodyLen >= 0;
  }
  /** A copy of the body, or null when it was not sent. */
  body(): Uint8Array | null {
    if (this.bodyLen < 0) return null;
    const b = new Uint8Array(this.bodyLen);
    memory.copy(b.dataStart, this.bodyPtr, <usize>this.bodyLen);
    return b;
  }
}

/** Decides for one message. Throwing is not possible in AssemblyScript: return an error with fail. */
export abstract class Matcher {
  /** Whether m matches the expression this matcher was compiled from. */
  abstract match(m: FilterMessage): bool;
  /**
   * The user properties match reads, or null (the default) for all of
   * them. The broker then sends only the properties named, which spares
   * match scanning the rest; FilterMessage.property and propertyIs see just
   * those. Tags and keys are unaffected.
   */
  propertyKeys(): string[] | null {
    return null;
  }
}

/** The error a compile function leaves when it refuses an expression. */
let compileError: string = "";

/** Refuses the expression being compiled with a reason; returns null. */
export function badExpression(reason: string): Matcher | null {
  compileError = reason;
  return null;
}

let compile: ((expr: string) => Matcher | null) | null = null;
const cache = new Map<string, Matcher>();

/**
 * Registers the filter: compile turns a subscription expression into a
 * Matcher, or refuses it with badExpression. Matchers are kept per
 * expression for the instance's life.
 */
export function registerFilter(fn: (expr: string) => Matcher | null): void {
  compile = fn;
  addKind(KIND_FILTER);
}

/** Asks the host for bodies in filter batches, inflated when compressed. */
export function wantBodies(): void {
  addFlags(FLAG_FILTER_BODY | FLAG_FILTER_BODY_INFLATED);
}

const msg = new FilterMessage();

/** The status matcherFor failed with. */
let matcherStatus: i32 = STATUS_OK;

/**
 * The matcher of the expression in the batch header at inPtr, compiled on
 * first sight, or null with matcherStatus set and the error left.
 */
function matcherFor(inPtr: usize, len: i32): Matcher | null {
  if (compile == null) {
    matcherStatus = fail(STATUS_NOT_IMPLEMENTED, "no filter registered");
    return null;
  }
  if (len < 4) {
    matcherStatus = fail(STATUS_BAD_INPUT, "short batch header");
    return null;
  }
  const exprLen = load<u32>(inPtr);
  if (exprLen > MAX_EXPRESSION_LEN || exprLen > <u32>(len - 4)) {
    matcherStatus = fail(STATUS_BAD_INPUT, "bad expression length");
    return null;
  }
  const expr = String.UTF8.decodeUnsafe(inPtr + 4, <usize>exprLen);
  if (cache.has(expr)) return cache.get(expr);
  compileError = "";
  const c = compile!(expr);
  if (c == null) {
    matcherStatus = fail(STATUS_BAD_EXPRESSION, compileError.length > 0 ? compileError : "expression refused");
    return null;
  }
  cache.set(expr, c);
  return c;
}

/** broker_filter(in, len, count, out) → status. */
export function broker_filter(inPtr: usize, len: i32, count: i32, out: usize): i32 {
  const mm = matcherFor(inPtr, len);
  if (mm == null) return matcherStatus;
  const m: Matcher = mm;
  let at: i32 = 4 + <i32>load<u32>(inPtr);
  for (let i = 0; i < count; i++) {
    if (len - at < RECORD_HEADER_LEN) return fail(STATUS_BAD_INPUT, "short record");
    const p = inPtr + <usize>at;
    const n = load<u32>(p);
    const bodyLen = load<u32>(p, 40);
    const topicLen = <i32>load<u16>(p, 44);
    const tagsLen = <i32>load<u16>(p, 46);
    const keysLen = <i32>load<u16>(p, 48);
    const propsLen = <i32>load<u16>(p, 50);
    let want: u64 = <u64>(RECORD_HEADER_LEN + topicLen + tagsLen + keysLen + propsLen);
    if (bodyLen != BODY_ABSENT) want += <u64>bodyLen;
    if (<u64>n != want || <u64>n > <u64>(len - at)) return fail(STATUS_BAD_INPUT, "record length does not match its fields");
    msg.ptr = p;
    msg.queueId = load<i32>(p, 4);
    msg.queueOffset = load<i64>(p, 8);
    msg.bornTimestamp = load<i64>(p, 16);
    msg.storeTimestamp = load<i64>(p, 24);
    msg.reconsumeTimes = load<i32>(p, 32);
    msg.sysFlag = load<i32>(p, 36);
    let f = p + <usize>RECORD_HEADER_LEN;
    msg.topicPtr = f; msg.topicLen = topicLen; f += <usize>topicLen;
    msg.tagsPtr = f; msg.tagsLen = tagsLen; f += <usize>tagsLen;
    msg.keysPtr = f; msg.keysLen = keysLen; f += <usize>keysLen;
    msg.propsPtr = f; msg.propsLen = propsLen; f += <usize>propsLen;
    msg.bodyPtr = f;
    msg.bodyLen = bodyLen == BODY_ABSENT ? -1 : <i32>bodyLen;
    store<u8>(out + <usize>i, m.match(msg) ? FILTER_MATCH : FILTER_NO_MATCH);
    at += <i32>n;
  }
  return STATUS_OK;
}

let keysPtr: usize = 0;

/**
 * broker_filter_keys(in, len) → PackPtrLen of the key list of the
 * expression in the batch header at in (a u16 count, then each key as a
 * u16 length and its bytes), 0 when its matcher reads every property, or a
 * negated status.
 */
export function broker_filter_keys(inPtr: usize, len: i32): i64 {
  const m = matcherFor(inPtr, len);
  if (m == null) return -<i64>matcherStatus;
  const keys = m.propertyKeys();
  if (keys == null) return 0;
  if (keys.length > MAX_FILTER_KEYS) return -<i64>fail(STATUS_FAILED, "propertyKeys: more than " + MAX_FILTER_KEYS.toString() + " keys");
  const encoded = new Array<ArrayBuffer>(keys.length);
  let n = 2;
  for (let i = 0; i < keys.length; i++) {
    const k = String.UTF8.encode(keys[i]);
    if (k.byteLength > 0xffff) return -<i64>fail(STATUS_FAILED, "propertyKeys: a key longer than 65535 bytes");
    encoded[i] = k;
    n += 2 + k.byteLength;
  }
  if (keysPtr != 0) heap.free(keysPtr);
  keysPtr = heap.alloc(<usize>n);
  store<u16>(keysPtr, <u16>keys.length);
  let at = keysPtr + 2;
  for (let i = 0; i < encoded.length; i++) {
    const k = encoded[i];
    store<u16>(at, <u16>k.byteLength);
    memory.copy(at + 2, changetype<usize>(k), <usize>k.byteLength);
    at += 2 + <usize>k.byteLength;
  }
  return packPtrLen(keysPtr, n);
}

/**
 * Adds a self-test: expression expr on a message with this topic, tag, keys
 * and properties (pairs: name, value, name, value ...) must give match. The
 * broker replays every self-test through the module before it serves and
 * refuses a module that fails one.
 */
export function addFilterTest(expr: string, topic: string, tag: string, keys: string, properties: string[], match: bool): void {
  let props = "";
  for (let i = 0; i + 1 < properties.length; i += 2) props += properties[i] + "\x01" + properties[i + 1] + "\x02";
  const e = String.UTF8.encode(expr);
  const t = String.UTF8.encode(topic);
  const g = String.UTF8.encode(tag);
  const k = String.UTF8.encode(keys);
  const p = String.UTF8.encode(props);
  const recLen = RECORD_HEADER_LEN + t.byteLength + g.byteLength + k.byteLength + p.byteLength;
  const inLen = 4 + e.byteLength + recLen;
  // vector header, input, one result byte
  const v = new ArrayBuffer(16 + inLen + 1);
  const b = changetype<usize>(v);
  store<u8>(b, KIND_FILTER);
  store<u32>(b, 1, 4);
  store<u32>(b, <u32>inLen, 8);
  store<u32>(b, 1, 12);
  let at = b + 16;
  store<u32>(at, <u32>e.byteLength);
  memory.copy(at + 4, changetype<usize>(e), <usize>e.byteLength);
  at += 4 + <usize>e.byteLength;
  store<u32>(at, <u32>recLen);
  store<u32>(at, BODY_ABSENT, 40);
  store<u16>(at, <u16>t.byteLength, 44);
  store<u16>(at, <u16>g.byteLength, 46);
  store<u16>(at, <u16>k.byteLength, 48);
  store<u16>(at, <u16>p.byteLength, 50);
  at += <usize>RECORD_HEADER_LEN;
  memory.copy(at, changetype<usize>(t), <usize>t.byteLength);
  at += <usize>t.byteLength;
  memory.copy(at, changetype<usize>(g), <usize>g.byteLength);
  at += <usize>g.byteLength;
  memory.copy(at, changetype<usize>(k), <usize>k.byteLength);
  at += <usize>k.byteLength;
  memory.copy(at, changetype<usize>(p), <usize>p.byteLength);
  at += <usize>p.byteLength;
  store<u8>(at, match ? FILTER_MATCH : FILTER_NO_MATCH);
  addSelfTest(v);
}

// STATUS_FAILED is for plugins that cannot decide; re-exported for them.
export { STATUS_FAILED };
