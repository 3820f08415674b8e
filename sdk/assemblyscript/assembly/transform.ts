// The transform kind: broker_transform on one message as it is sent
// (docs/plugins.md, "Transform record" and "Transform result").
import {
  addKind, addSelfTest, fail, findProperty, packPtrLen, KIND_TRANSFORM, MAX_ERROR_LEN,
  STATUS_BAD_INPUT, STATUS_NOT_IMPLEMENTED,
} from "./abi";

const RECORD_HEADER_LEN: i32 = 16;
const RESULT_HEADER_LEN: i32 = 20;
const ACTION_CHANGE: u32 = 1;
const ACTION_REJECT: u32 = 2;
const UNCHANGED: u32 = 0xffffffff;
const MAX_TOPIC_LEN: i32 = 127;

/**
 * One message on its way to the store. Read it with the getters; change it
 * with the setters or refuse it with reject. A message nobody changes is
 * stored as sent.
 */
export class TransformMessage {
  sysFlag: u32 = 0;
  topicPtr: usize = 0;
  topicLen: i32 = 0;
  propsPtr: usize = 0;
  propsLen: i32 = 0;
  bodyPtr: usize = 0;
  bodyLen: i32 = 0;

  newTopic: string | null = null;
  newProps: Map<string, string> | null = null;
  propOrder: string[] = [];
  newBody: Uint8Array | null = null;
  rejectReason: string | null = null;

  /** Whether the body is zlib-compressed as sent (SysFlag bit 0). */
  compressed(): bool {
    return (this.sysFlag & 1) != 0;
  }
  /** The topic the message is sent to. */
  topic(): string {
    return this.newTopic != null ? this.newTopic! : String.UTF8.decodeUnsafe(this.topicPtr, <usize>this.topicLen);
  }
  /** A property's value (after this call's changes), or null. */
  property(name: string): string | null {
    if (this.newProps != null) {
      const p = this.newProps!;
      return p.has(name) ? p.get(name) : null;
    }
    const at = findProperty(this.propsPtr, this.propsLen, String.UTF8.encode(name));
    if (at < 0) return null;
    return String.UTF8.decodeUnsafe(this.propsPtr + <usize>(at >>> 32), <usize>(<u32>at));
  }
  /** The body as sent, decoded as UTF-8. */
  bodyText(): string {
    if (this.newBody != null) return String.UTF8.decode(this.newBody!.buffer);
    return String.UTF8.decodeUnsafe(this.bodyPtr, <usize>this.bodyLen);
  }
  /** A copy of the body bytes. */
  body(): Uint8Array {
    if (this.newBody != null) return this.newBody!;
    const b = new Uint8Array(this.bodyLen);
    memory.copy(b.dataStart, this.bodyPtr, <usize>this.bodyLen);
    return b;
  }
  /** Sends the message to another topic (1 to 127 bytes). */
  setTopic(t: string): void {
    this.newTopic = t;
  }
  /** Sets a property. */
  setProperty(name: string, value: string): void {
    this.loadProps();
    if (!this.newProps!.has(name)) this.propOrder.push(name);
    this.newProps!.set(name, value);
  }
  /** Removes a property. */
  removeProperty(name: string): void {
    this.loadProps();
    this.newProps!.delete(name);
  }
  /** Replaces the body with text's UTF-8 bytes. */
  setBodyText(text: string): void {
    this.newBody = Uint8Array.wrap(String.UTF8.encode(text));
  }
  /** Replaces the body. */
  setBody(b: Uint8Array): void {
    this.newBody = b;
  }
  /** Refuses the send; the producer receives reason (at most 1024 bytes). */
  reject(reason: string): void {
    this.rejectReason = reason;
  }

  private loadProps(): void {
    if (this.newProps != null) return;
    const m = new Map<string, string>();
    const order = new Array<string>();
    let i = 0;
    const p = this.propsPtr;
    while (i < this.propsLen) {
      let sep = i;
      while (sep < this.propsLen && load<u8>(p + sep) != 1) sep++;
      if (sep >= this.propsLen) break;
      let end = sep + 1;
      while (end < this.propsLen && load<u8>(p + end) != 2) end++;
      const k = String.UTF8.decodeUnsafe(p + i, <usize>(sep - i));
      if (!m.has(k)) order.push(k);
      m.set(k, String.UTF8.decodeUnsafe(p + sep + 1, <usize>(end - sep - 1)));
      i = end + 1;
    }
    this.newProps = m;
    this.propOrder = order;
  }

  reset(): void {
    this.newTopic = null;
    this.newProps = null;
    this.propOrder = [];
    this.newBody = null;
    this.rejectReason = null;
  }
}

let transform: ((m: TransformMessage) => void) | null = null;

/**
 * Registers the transform: fn sees each message before it is stored and
 * may change it or reject it; a message it leaves alone is stored as sent.
 */
export function registerTransform(fn: (m: TransformMessage) => void): void {
  transform = fn;
  addKind(KIND_TRANSFORM);
}

const msg = new TransformMessage();
let resultPtr: usize = 0;
let resultCap: i32 = 0;

function resultBuffer(n: i32): usize {
  if (n > resultCap) {
    if (resultPtr != 0) heap.free(resultPtr);
    resultCap = n < 4096 ? 4096 : n;
    resultPtr = heap.alloc(<usize>resultCap);
  }
  return resultPtr;
}

/** broker_transform(in, len) → 0 (pass), PackPtrLen of a result, or −status. */
export function broker_transform(inPtr: usize, len: i32): i64 {
  if (transform == null) return -<i64>fail(STATUS_NOT_IMPLEMENTED, "no transform registered");
  if (len < RECORD_HEADER_LEN || load<u16>(inPtr, 6) != 0) return -<i64>fail(STATUS_BAD_INPUT, "short transform record");
  const topicLen = <u64>load<u16>(inPtr, 4);
  const propsLen = <u64>load<u32>(inPtr, 8);
  const bodyLen = <u64>load<u32>(inPtr, 12);
  if (<u64>RECORD_HEADER_LEN + topicLen + propsLen + bodyLen != <u64>len) {
    return -<i64>fail(STATUS_BAD_INPUT, "transform record length does not match its fields");
  }
  msg.reset();
  msg.sysFlag = load<u32>(inPtr);
  msg.topicPtr = inPtr + <usize>RECORD_HEADER_LEN;
  msg.topicLen = <i32>topicLen;
  msg.propsPtr = msg.topicPtr + <usize>topicLen;
  msg.propsLen = <i32>propsLen;
  msg.bodyPtr = msg.propsPtr + <usize>propsLen;
  msg.bodyLen = <i32>bodyLen;
  transform!(msg);

  if (msg.rejectReason != null) {
    const r = String.UTF8.encode(msg.rejectReason!);
    let n = r.byteLength;
    if (n > MAX_ERROR_LEN) n = MAX_ERROR_LEN;
    const p = resultBuffer(RESULT_HEADER_LEN + n);
    store<u32>(p, ACTION_REJECT);
    store<u32>(p, UNCHANGED, 4);
    store<u32>(p, UNCHANGED, 8);
    store<u32>(p, UNCHANGED, 12);
    store<u32>(p, <u32>n, 16);
    memory.copy(p + <usize>RESULT_HEADER_LEN, changetype<usize>(r), <usize>n);
    return packPtrLen(p, RESULT_HEADER_LEN + n);
  }
  if (msg.newTopic == null && msg.newProps == null && msg.newBody == null) return 0;

  let topic: ArrayBuffer | null = null;
  if (msg.newTopic != null) {
    topic = String.UTF8.encode(msg.newTopic!);
    if (topic.byteLength == 0 || topic.byteLength > MAX_TOPIC_LEN) {
      return -<i64>fail(STATUS_BAD_INPUT, "transform set a topic of " + topic.byteLength.toString() + " bytes (1 to 127)");
    }
  }
  let props: ArrayBuffer | null = null;
  if (msg.newProps != null) {
    let s = "";
    const m = msg.newProps!;
    for (let i = 0; i < msg.propOrder.length; i++) {
      const k = msg.propOrder[i];
      if (!m.has(k)) continue;
      s += k + "\x01" + m.get(k) + "\x02";
    }
    props = String.UTF8.encode(s);
  }
  const body = msg.newBody;
  let n = RESULT_HEADER_LEN;
  if (topic != null) n += topic.byteLength;
  if (props != null) n += props.byteLength;
  if (body != null) n += body.byteLength;
  const p = resultBuffer(n);
  store<u32>(p, ACTION_CHANGE);
  store<u32>(p, topic != null ? <u32>topic.byteLength : UNCHANGED, 4);
  store<u32>(p, props != null ? <u32>props.byteLength : UNCHANGED, 8);
  store<u32>(p, body != null ? <u32>body.byteLength : UNCHANGED, 12);
  store<u32>(p, 0, 16);
  let at = p + <usize>RESULT_HEADER_LEN;
  if (topic != null) {
    memory.copy(at, changetype<usize>(topic), <usize>topic.byteLength);
    at += <usize>topic.byteLength;
  }
  if (props != null) {
    memory.copy(at, changetype<usize>(props), <usize>props.byteLength);
    at += <usize>props.byteLength;
  }
  if (body != null) memory.copy(at, body.dataStart, <usize>body.byteLength);
  return packPtrLen(p, n);
}

/**
 * What a transform self-test expects: build it with wantStored, wantRejected
 * or wantChanged.
 */
export class TransformWant {
  reject: bool = false;
  reason: string = "";
  topic: string = "";
  properties: string[] | null = null;
  body: string | null = null;
}

/** The message must be stored as it was sent. */
export function wantStored(): TransformWant {
  return new TransformWant();
}

/** The message must be rejected with a reason that contains reason. */
export function wantRejected(reason: string): TransformWant {
  const w = new TransformWant();
  w.reject = true;
  w.reason = reason;
  return w;
}

/**
 * The message must be stored to topic ("": the one it was sent to), with
 * exactly these properties (pairs: name, value, ...; null: as sent, TAGS
 * and KEYS among them) and this body (null: as sent). The broker compares
 * properties as a set, in any order.
 */
export function wantChanged(topic: string, properties: string[] | null, body: string | null): TransformWant {
  const w = new TransformWant();
  w.topic = topic;
  w.properties = properties;
  w.body = body;
  return w;
}

function encodePairs(pairs: string[]): ArrayBuffer {
  let s = "";
  for (let i = 0; i + 1 < pairs.length; i += 2) s += pairs[i] + "\x01" + pairs[i + 1] + "\x02";
  return String.UTF8.encode(s);
}

function put(at: usize, b: ArrayBuffer | null): usize {
  if (b == null) return at;
  memory.copy(at, changetype<usize>(b), <usize>b.byteLength);
  return at + <usize>b.byteLength;
}

/**
 * Adds a transform self-test (ABI v1.3): a message sent to topic with these
 * properties (pairs: name, value, ...; tags and keys as TAGS and KEYS) and
 * body must come out as want says. The broker replays it on every load and
 * reload and refuses the module, naming the test, if the outcome differs.
 */
export function addTransformTest(name: string, topic: string, properties: string[], body: string, want: TransformWant): void {
  const nm = String.UTF8.encode(name);
  const t = String.UTF8.encode(topic);
  const p = encodePairs(properties);
  const b = String.UTF8.encode(body);
  const inLen = RECORD_HEADER_LEN + t.byteLength + p.byteLength + b.byteLength;
  let wt: ArrayBuffer | null = null;
  let wp: ArrayBuffer | null = null;
  let wb: ArrayBuffer | null = null;
  let wr: ArrayBuffer | null = null;
  if (want.reject) wr = String.UTF8.encode(want.reason);
  if (want.topic.length > 0) wt = String.UTF8.encode(want.topic);
  if (want.properties != null) wp = encodePairs(want.properties!);
  if (want.body != null) wb = String.UTF8.encode(want.body!);
  const result = want.reject || wt != null || wp != null || wb != null;
  let outLen = 2 + nm.byteLength;
  if (result) {
    outLen += RESULT_HEADER_LEN;
    if (wt != null) outLen += wt.byteLength;
    if (wp != null) outLen += wp.byteLength;
    if (wb != null) outLen += wb.byteLength;
    if (wr != null) outLen += wr.byteLength;
  }
  const v = new ArrayBuffer(16 + inLen + outLen);
  const base = changetype<usize>(v);
  store<u8>(base, KIND_TRANSFORM);
  store<u32>(base, 0, 4);
  store<u32>(base, <u32>inLen, 8);
  store<u32>(base, <u32>outLen, 12);
  let at = base + 16;
  store<u32>(at, 0);
  store<u16>(at, <u16>t.byteLength, 4);
  store<u16>(at, 0, 6);
  store<u32>(at, <u32>p.byteLength, 8);
  store<u32>(at, <u32>b.byteLength, 12);
  at = put(put(put(at + <usize>RECORD_HEADER_LEN, t), p), b);
  store<u16>(at, <u16>nm.byteLength);
  at = put(at + 2, nm);
  if (result) {
    store<u32>(at, want.reject ? ACTION_REJECT : ACTION_CHANGE);
    store<u32>(at, wt != null ? <u32>wt.byteLength : UNCHANGED, 4);
    store<u32>(at, wp != null ? <u32>wp.byteLength : UNCHANGED, 8);
    store<u32>(at, wb != null ? <u32>wb.byteLength : UNCHANGED, 12);
    store<u32>(at, wr != null ? <u32>wr.byteLength : 0, 16);
    put(put(put(put(at + <usize>RESULT_HEADER_LEN, wt), wp), wb), wr);
  }
  addSelfTest(v);
}
