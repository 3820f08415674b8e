// The guest side of the broker's plugin ABI v1.3 shared by every kind: the
// host imports, the reusable buffer, the config, the info block and error
// messages. Layouts are those of package sdk/abi (docs/plugins.md, "ABI").

/** ABI major and minor this SDK speaks. */
export const ABI_VERSION: u16 = 1;
export const ABI_MINOR: u16 = 3;

/** Statuses a guest function returns (sdk/abi Status). */
export const STATUS_OK: i32 = 0;
export const STATUS_NOT_IMPLEMENTED: i32 = 1;
export const STATUS_BAD_INPUT: i32 = 2;
export const STATUS_BAD_EXPRESSION: i32 = 3;
export const STATUS_BAD_CONFIG: i32 = 4;
export const STATUS_FAILED: i32 = 5;

/** Extension kind bits of the info block. */
export const KIND_FILTER: u8 = 1;
export const KIND_TRANSFORM: u8 = 8;

/** Info flag: filter batches carry bodies; and inflated by the host. */
export const FLAG_FILTER_BODY: u8 = 1;
export const FLAG_FILTER_BODY_INFLATED: u8 = 2;

/** The longest error message the host reads. */
export const MAX_ERROR_LEN: i32 = 1024;

/** log/slog levels for log(). */
export const LEVEL_DEBUG: i32 = -4;
export const LEVEL_INFO: i32 = 0;
export const LEVEL_WARN: i32 = 4;
export const LEVEL_ERROR: i32 = 8;

@external("broker_v1", "log")
declare function hostLog(level: i32, ptr: usize, len: i32): void;

@external("broker_v1", "now_ms")
declare function hostNowMs(): i64;

/** Writes one line to the broker's log at a log/slog level. */
export function log(level: i32, msg: string): void {
  const b = String.UTF8.encode(msg);
  hostLog(level, changetype<usize>(b), b.byteLength);
}

/** The broker's wall clock in milliseconds. */
export function nowMs(): i64 {
  return hostNowMs();
}

// The buffer the host copies each call's input into; unmanaged memory, so
// the collector never frees or moves it.
let bufPtr: usize = 0;
let bufCap: i32 = 0;

/** The guest buffer: what the host wrote into it, and where errors go. */
export function bufferPtr(): usize {
  return bufPtr;
}

/** Leaves msg at the start of the buffer as the call's error message. */
export function setError(msg: string): void {
  if (bufCap < 4) return;
  const b = String.UTF8.encode(msg);
  let n = b.byteLength;
  if (n > MAX_ERROR_LEN) n = MAX_ERROR_LEN;
  if (n > bufCap - 4) n = bufCap - 4;
  store<u32>(bufPtr, n);
  memory.copy(bufPtr + 4, changetype<usize>(b), n);
}

/** Returns status after leaving msg as its error message. */
export function fail(status: i32, msg: string): i32 {
  setError(msg);
  return status;
}

let pluginVersion: string = "0.0.0";
let kinds: u8 = 0;
let flags: u8 = 0;
let initHook: ((config: string) => string | null) | null = null;
let configText: string = "";

/** Sets the plugin's own version label, shown by the broker's stats. */
export function setVersion(v: string): void {
  pluginVersion = v;
}

/** Adds kind bits to the info block (the register functions do). */
export function addKind(k: u8): void {
  kinds |= k;
}

/** Adds flag bits to the info block. */
export function addFlags(f: u8): void {
  flags |= f;
}

/**
 * Registers the function that receives the plugin's config (UTF-8 text)
 * once per instance. It returns null to accept it or a reason to refuse.
 */
export function onInit(fn: (config: string) => string | null): void {
  initHook = fn;
}

/** The config broker_init received. */
export function config(): string {
  return configText;
}

let infoPtr: usize = 0;

// The wasm exports; an entry file re-exports them through exports/*.ts.

/** broker_abi_v1: the ABI marker, never called. */
export function broker_abi_v1(): void {}

/** broker_buffer(size) → ptr: a buffer of at least size bytes, reused. */
export function broker_buffer(size: i32): usize {
  if (size > bufCap) {
    if (bufPtr != 0) heap.free(bufPtr);
    const cap = size < 4096 ? 4096 : size;
    bufPtr = heap.alloc(<usize>cap);
    bufCap = cap;
  }
  return bufPtr;
}

/** broker_init(ptr, len) → status: the plugin's config. */
export function broker_init(ptr: usize, len: i32): i32 {
  configText = String.UTF8.decodeUnsafe(ptr, <usize>len);
  if (initHook == null) return STATUS_OK;
  const err = initHook!(configText);
  if (err != null) return fail(STATUS_BAD_CONFIG, err);
  return STATUS_OK;
}

/** broker_info() → PackPtrLen of the info block. */
export function broker_info(): i64 {
  const v = String.UTF8.encode(pluginVersion);
  let vn = v.byteLength;
  if (vn > 255) vn = 255;
  const n = 2 + 1 + 1 + 2 + vn + 2;
  if (infoPtr != 0) heap.free(infoPtr);
  infoPtr = heap.alloc(<usize>n);
  store<u16>(infoPtr, ABI_VERSION);
  store<u8>(infoPtr + 2, kinds);
  store<u8>(infoPtr + 3, flags);
  store<u16>(infoPtr + 4, <u16>vn);
  memory.copy(infoPtr + 6, changetype<usize>(v), vn);
  store<u16>(infoPtr + 6 + vn, ABI_MINOR);
  return packPtrLen(infoPtr, n);
}

/** Packs a pointer and a length the way the host unpacks them. */
export function packPtrLen(ptr: usize, n: i32): i64 {
  return (<i64>ptr << 32) | <i64>(<u32>n);
}

/** Compares len bytes at a with the UTF-8 bytes of b. */
export function bytesEqual(a: usize, len: i32, b: ArrayBuffer): bool {
  if (len != b.byteLength) return false;
  return memory.compare(a, changetype<usize>(b), <usize>len) == 0;
}

/**
 * Finds the value of property key in a properties string (key 0x01 value
 * 0x02 ...) at ptr, len bytes. Returns the value's offset and length packed
 * as (off << 32 | len), or -1 when absent.
 */
export function findProperty(ptr: usize, len: i32, key: ArrayBuffer): i64 {
  let i = 0;
  const kn = key.byteLength;
  while (i < len) {
    let sep = i;
    while (sep < len && load<u8>(ptr + sep) != 1) sep++;
    if (sep >= len) return -1;
    let end = sep + 1;
    while (end < len && load<u8>(ptr + end) != 2) end++;
    if (sep - i == kn && memory.compare(ptr + i, changetype<usize>(key), <usize>kn) == 0) {
      return (<i64>(sep + 1) << 32) | <i64>(end - sep - 1);
    }
    i = end + 1;
  }
  return -1;
}

// Self-test vectors, each encoded whole (kind, count, input, expected
// output) by the kind that added it; the host replays them on every load
// and reload.
const selfTests = new Array<ArrayBuffer>();

/** Adds one encoded self-test vector. */
export function addSelfTest(v: ArrayBuffer): void {
  selfTests.push(v);
}

let selfTestPtr: usize = 0;

/** broker_selftest() → PackPtrLen of the self-test vectors. */
export function broker_selftest(): i64 {
  let n = 4;
  for (let i = 0; i < selfTests.length; i++) n += selfTests[i].byteLength;
  if (selfTestPtr != 0) heap.free(selfTestPtr);
  selfTestPtr = heap.alloc(<usize>n);
  store<u32>(selfTestPtr, <u32>selfTests.length);
  let at = selfTestPtr + 4;
  for (let i = 0; i < selfTests.length; i++) {
    const v = selfTests[i];
    memory.copy(at, changetype<usize>(v), <usize>v.byteLength);
    at += <usize>v.byteLength;
  }
  return packPtrLen(selfTestPtr, n);
}
