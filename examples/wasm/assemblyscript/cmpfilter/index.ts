// cmpfilter: comparisons of user properties with literals, all of which
// must hold; the subset of SQL92 that compares properties with constants:
//
//   a > 50 AND a <= 80 AND color = 'red'
//
// Each clause is name op literal, with op one of = <> < <= > >=. A number
// literal (an optional sign, digits, an optional fraction) compares
// numerically with the property's value read as a number; a 'quoted'
// literal compares byte for byte, with = and <> only. As in SQL92, a clause
// over a missing property, or a value that does not read as a number
// compared with a number, is unknown, so the message does not match. It
// gives the broker's SQL92 filter's answers within that subset (a test
// holds it to them), has the broker send only the properties it names and
// reads them in place, allocating nothing per message.
import { FilterMessage, Matcher, registerFilter, badExpression, setVersion, addFilterTest, findProperty } from "../../../../sdk/assemblyscript/assembly/index";
export * from "../../../../sdk/assemblyscript/assembly/exports/filter";

const OP_EQ: i32 = 0;
const OP_NE: i32 = 1;
const OP_LT: i32 = 2;
const OP_LE: i32 = 3;
const OP_GT: i32 = 4;
const OP_GE: i32 = 5;

// POW10[k] is 10^k, exact for k ≤ 22.
const POW10: StaticArray<f64> = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22];

// readNumber reads the n bytes at p as a decimal number, NaN when they do
// not read as one. With at most 15 digits and 22 after the point the
// result is the correctly rounded quotient of two exact values, as a full
// parser gives.
function readNumber(p: usize, n: i32): f64 {
  let i = 0;
  let neg = false;
  if (n > 0) {
    const c = load<u8>(p);
    if (c == 0x2d || c == 0x2b) {
      neg = c == 0x2d;
      i = 1;
    }
  }
  let mant: u64 = 0;
  let digits = 0;
  let frac = 0;
  let point = false;
  for (; i < n; i++) {
    const c = load<u8>(p + <usize>i);
    if (c == 0x2e && !point) {
      point = true;
      continue;
    }
    if (c < 0x30 || c > 0x39) return NaN;
    mant = mant * 10 + <u64>(c - 0x30);
    digits++;
    if (point) frac++;
  }
  if (digits == 0 || digits > 15 || frac > 22) return NaN;
  const v = <f64>mant / POW10[frac];
  return neg ? -v : v;
}

class Clause {
  constructor(public key: string, public name: ArrayBuffer, public op: i32, public numeric: bool, public num: f64, public text: ArrayBuffer) {}
}

class AllOf extends Matcher {
  constructor(public clauses: Clause[]) {
    super();
  }
  // The broker sends only the properties the clauses name.
  propertyKeys(): string[] | null {
    const keys = new Array<string>();
    for (let i = 0; i < this.clauses.length; i++) {
      if (!keys.includes(this.clauses[i].key)) keys.push(this.clauses[i].key);
    }
    return keys;
  }
  match(m: FilterMessage): bool {
    for (let i = 0; i < this.clauses.length; i++) {
      const c = unchecked(this.clauses[i]);
      const at = findProperty(m.propsPtr, m.propsLen, c.name);
      if (at < 0) return false;
      const p = m.propsPtr + <usize>(at >>> 32);
      const n = <i32>(<u32>at);
      if (c.numeric) {
        const v = readNumber(p, n);
        if (isNaN(v)) return false;
        let ok = false;
        switch (c.op) {
          case OP_EQ: ok = v == c.num; break;
          case OP_NE: ok = v != c.num; break;
          case OP_LT: ok = v < c.num; break;
          case OP_LE: ok = v <= c.num; break;
          case OP_GT: ok = v > c.num; break;
          default: ok = v >= c.num;
        }
        if (!ok) return false;
      } else {
        const same = n == c.text.byteLength && memory.compare(p, changetype<usize>(c.text), <usize>n) == 0;
        if (same != (c.op == OP_EQ)) return false;
      }
    }
    return true;
  }
}

function compile(expr: string): Matcher | null {
  const parts = expr.split(" AND ");
  const clauses = new Array<Clause>();
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i].trim();
    let at = -1;
    for (let j = 0; j < p.length; j++) {
      const c = p.charAt(j);
      if (c == "<" || c == ">" || c == "=") {
        at = j;
        break;
      }
    }
    if (at <= 0) return badExpression("bad clause '" + p + "': want name op literal");
    let opLen = 1;
    let op = OP_EQ;
    const two = p.substr(at, 2);
    if (two == "<=") { op = OP_LE; opLen = 2; }
    else if (two == ">=") { op = OP_GE; opLen = 2; }
    else if (two == "<>") { op = OP_NE; opLen = 2; }
    else if (p.charAt(at) == "<") op = OP_LT;
    else if (p.charAt(at) == ">") op = OP_GT;
    const name = p.substring(0, at).trim();
    const lit = p.substring(at + opLen).trim();
    if (name.length == 0 || lit.length == 0) return badExpression("bad clause '" + p + "': want name op literal");
    if (lit.length >= 2 && lit.startsWith("'") && lit.endsWith("'")) {
      if (op != OP_EQ && op != OP_NE) return badExpression("bad clause '" + p + "': text compares with = or <> only");
      clauses.push(new Clause(name, String.UTF8.encode(name), op, false, 0, String.UTF8.encode(lit.substring(1, lit.length - 1))));
      continue;
    }
    const b = String.UTF8.encode(lit);
    const v = readNumber(changetype<usize>(b), b.byteLength);
    if (isNaN(v)) return badExpression("bad clause '" + p + "': '" + lit + "' is neither a number nor 'text'");
    clauses.push(new Clause(name, String.UTF8.encode(name), op, true, v, new ArrayBuffer(0)));
  }
  return new AllOf(clauses);
}

setVersion("1.0.0");
registerFilter(compile);

addFilterTest("a > 50 AND color = 'red'", "Orders", "", "", ["a", "51", "color", "red"], true);
addFilterTest("a > 50 AND color = 'red'", "Orders", "", "", ["a", "50", "color", "red"], false);
addFilterTest("a >= 1.5", "Orders", "", "", ["a", "x"], false);
