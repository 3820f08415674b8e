// propfilter: a filter over tags, keys and user properties. An expression
// is clauses joined by '&', all of which must hold:
//
//   tag=gold          the message's tag is gold
//   key=k1            k1 is one of the message's keys
//   region=eu         user property region is eu
//   !region           the message has no property region
import { FilterMessage, Matcher, registerFilter, badExpression, setVersion, addFilterTest } from "../../../../sdk/assemblyscript/assembly/index";
export * from "../../../../sdk/assemblyscript/assembly/exports/filter";

const CLAUSE_TAG: i32 = 0;
const CLAUSE_KEY: i32 = 1;
const CLAUSE_PROPERTY: i32 = 2;
const CLAUSE_ABSENT: i32 = 3;

class Clause {
  constructor(public kind: i32, public name: ArrayBuffer, public value: ArrayBuffer) {}
}

class AllOf extends Matcher {
  constructor(public clauses: Clause[]) {
    super();
  }
  match(m: FilterMessage): bool {
    for (let i = 0; i < this.clauses.length; i++) {
      const c = this.clauses[i];
      let ok = false;
      if (c.kind == CLAUSE_TAG) ok = m.tagIs(c.value);
      else if (c.kind == CLAUSE_KEY) ok = m.hasKey(c.value);
      else if (c.kind == CLAUSE_PROPERTY) ok = m.propertyIs(c.name, c.value);
      else ok = m.property(String.UTF8.decode(c.name)) == null;
      if (!ok) return false;
    }
    return true;
  }
}

function compile(expr: string): Matcher | null {
  const parts = expr.split("&");
  const clauses = new Array<Clause>();
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i].trim();
    if (p.length == 0) return badExpression("empty clause in '" + expr + "'");
    if (p.charAt(0) == "!") {
      const name = p.substring(1).trim();
      if (name.length == 0 || name.includes("=")) return badExpression("bad clause '" + p + "': want !name");
      clauses.push(new Clause(CLAUSE_ABSENT, String.UTF8.encode(name), new ArrayBuffer(0)));
      continue;
    }
    const eq = p.indexOf("=");
    if (eq <= 0) return badExpression("bad clause '" + p + "': want name=value");
    const name = p.substring(0, eq).trim();
    const value = p.substring(eq + 1).trim();
    if (name.length == 0 || value.length == 0) return badExpression("bad clause '" + p + "': want name=value");
    let kind = CLAUSE_PROPERTY;
    if (name == "tag") kind = CLAUSE_TAG;
    else if (name == "key") kind = CLAUSE_KEY;
    clauses.push(new Clause(kind, String.UTF8.encode(name), String.UTF8.encode(value)));
  }
  return new AllOf(clauses);
}

setVersion("1.0.0");
registerFilter(compile);

// Self-tests: the broker replays them through the module on every load and
// reload and refuses it if one fails.
addFilterTest("tag=gold&region=eu", "Orders", "gold", "k1", ["region", "eu"], true);
addFilterTest("tag=gold&region=eu", "Orders", "gold", "k1", ["region", "us"], false);
addFilterTest("key=k2", "Orders", "", "k1 k2", [], true);
addFilterTest("!region", "Orders", "", "", ["region", "eu"], false);
if (isDefined(SELFTEST_WRONG)) {
  // Built with --use SELFTEST_WRONG=1 by the test that proves the broker
  // replays these: a vector no correct module passes.
  addFilterTest("tag=gold", "Orders", "silver", "", [], true);
}
