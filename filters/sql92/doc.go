// Package sql92 owns the SQL92 subset that RocketMQ consumers subscribe
// with (expression type "SQL92"): compiling an expression once, evaluating
// it against a message's properties without allocating, and a Cache that
// shares one compiled expression among all subscriptions that use it.
//
// It imports only the standard library and core/message (which reads
// properties with the leaf codec internal/properties), so it also builds for
// GOOS=wasip1 and runs inside WebAssembly filter plugins.
//
// As a broker filter, an *Expr passes every consume-queue tag hash
// (MatchTagHash is always true) and asks for each record (NeedsRecord is
// true); Match evaluates the records' properties.
//
// # Grammar
//
//	selector   = or .
//	or         = and { OR and } .
//	and        = not { AND not } .
//	not        = NOT not | equality .
//	equality   = comparison { ( "=" | "<>" ) comparison | IS [ NOT ] NULL } .
//	comparison = unary { ( ">" | ">=" | "<" | "<=" ) unary
//	                   | [ NOT ] ( CONTAINS | STARTSWITH | ENDSWITH ) string
//	                   | [ NOT ] BETWEEN unary AND unary
//	                   | [ NOT ] IN "(" string { "," string } ")" } .
//	unary      = ( "+" | "-" ) unary | primary .
//	primary    = literal | property | "(" or ")" .
//	literal    = string | integer | float | TRUE | FALSE | NULL .
//
//	property   = ( letter | "_" | "$" ) { letter | digit | "_" | "$" } .
//	integer    = ( "0" | nonzero { digit } ) [ "L" | "l" ] .
//	float      = digits "." { digit } [ exponent ] | "." digits [ exponent ]
//	           | digits exponent .
//	exponent   = ( "E" | "e" ) [ "+" | "-" ] digits .
//	string     = "'" { any byte but "'" | "''" } "'" .
//	comment    = "--" to the end of the line | "/*" to the next "*/" .
//
// Letters are ASCII. Keywords (AND OR NOT BETWEEN IN IS NULL TRUE FALSE
// CONTAINS STARTSWITH ENDSWITH) are matched in any case; property names are
// case-sensitive, so TAGS and tags are two properties. A property whose
// name is a keyword or holds other characters (a dot, a dash) cannot be
// referred to. Inside a string literal a doubled quote stands for one
// quote, so the text it's is written
//
//	'it''s'
//
// Integers are int64 and floats float64; literals beyond their range are
// rejected. Comments and white space (space, tab, CR, LF, form feed)
// separate tokens.
//
// # Precedence
//
//	+-------+---------------------------------------------+---------------+
//	| level | operators (loosest first)                   | grouping      |
//	+-------+---------------------------------------------+---------------+
//	|   1   | OR                                          | left          |
//	|   2   | AND                                         | left          |
//	|   3   | NOT                                         | prefix        |
//	|   4   | =  <>  IS NULL  IS NOT NULL                 | left          |
//	|   5   | <  <=  >  >=  [NOT] BETWEEN, IN, CONTAINS,  | left          |
//	|       | STARTSWITH, ENDSWITH                        |               |
//	|   6   | unary +  -                                  | prefix        |
//	+-------+---------------------------------------------+---------------+
//
// So a OR b AND c is a OR (b AND c), and NOT a = 1 is NOT (a = 1).
//
// # Values and types
//
// A property's value is its text, or NULL when the message lacks the
// property (a property present with an empty value is the empty text, not
// NULL; of a property set twice the last value counts). Text "reads as a
// number" when it is an optional sign and decimal digits with an optional
// fraction and exponent, nothing else: no white space, hex, NaN or
// Infinity. It is then a long if it has neither fraction nor exponent and
// fits int64, else a double.
//
//	+------------------+----------------------------+------------------------+
//	| operands         | =  <>                      | <  <=  >  >=  BETWEEN  |
//	+------------------+----------------------------+------------------------+
//	| NULL, any        | NULL                       | NULL                   |
//	| number, number   | numeric: long with long    | numeric                |
//	|                  | exactly, else as doubles   |                        |
//	| text, number     | numeric if the text reads  | numeric if the text    |
//	|                  | as a number, else unequal  | reads as one, else NULL|
//	| text, text       | byte for byte              | numeric if both read   |
//	|                  |                            | as numbers, else NULL  |
//	| text, boolean    | the text is TRUE if it is  | compile error          |
//	|                  | "true" in any case, else   |                        |
//	|                  | FALSE; then compared       |                        |
//	| boolean, boolean | equal                      | compile error          |
//	| boolean, number  | unequal                    | compile error          |
//	+------------------+----------------------------+------------------------+
//
// Literal operands decide the types: a > 5 compares numerically, a = '5'
// as text, a = TRUE as a boolean. Other operators:
//
//   - x [NOT] BETWEEN lo AND hi is x >= lo AND x <= hi (both bounds
//     inclusive); NOT BETWEEN is x < lo OR x > hi.
//   - p [NOT] IN (...) tests text membership byte for byte; p must be a
//     property. NULL when p is absent, for IN and NOT IN alike.
//   - x [NOT] CONTAINS / STARTSWITH / ENDSWITH s test text byte for byte.
//     They are FALSE, never NULL, when x is not text (an absent property,
//     a number) or s is empty, in the NOT forms too.
//   - x IS [NOT] NULL is TRUE or FALSE, never NULL.
//   - A property standing alone as a condition is FALSE when present (its
//     text is never a boolean) and NULL when absent.
//   - A minus before anything but a numeric literal yields NULL.
//
// Compile rejects, as RocketMQ does: a literal other than a number, or a
// condition, as an operand of <, <=, >, >= or BETWEEN; NULL as an operand of
// = or <>; a boolean literal compared with another kind of literal;
// BETWEEN (and NOT BETWEEN) with literal bounds where the lower exceeds the
// upper; IN after anything but a property; a number, a string or a
// negation where a condition is expected (a = 1 AND 5).
//
// # NULL and three-valued logic
//
// AND, OR and NOT follow three-valued logic; a message matches only when
// the whole expression is TRUE, so FALSE and NULL both filter it out.
//
//	+-------+-------+---------+--------+-------+
//	| x     | y     | x AND y | x OR y | NOT x |
//	+-------+-------+---------+--------+-------+
//	| TRUE  | TRUE  | TRUE    | TRUE   | FALSE |
//	| TRUE  | FALSE | FALSE   | TRUE   | FALSE |
//	| TRUE  | NULL  | NULL    | TRUE   | FALSE |
//	| FALSE | TRUE  | FALSE   | TRUE   | TRUE  |
//	| FALSE | FALSE | FALSE   | FALSE  | TRUE  |
//	| FALSE | NULL  | FALSE   | NULL   | TRUE  |
//	| NULL  | TRUE  | NULL    | TRUE   | NULL  |
//	| NULL  | FALSE | FALSE   | NULL   | NULL  |
//	| NULL  | NULL  | NULL    | NULL   | NULL  |
//	+-------+-------+---------+--------+-------+
//
// With property a absent:
//
//	+-----------------------+--------+--------+
//	| expression            | value  | match  |
//	+-----------------------+--------+--------+
//	| a = 1, a <> 1, a > 1  | NULL   | no     |
//	| NOT (a = 1)           | NULL   | no     |
//	| a IN ('x')            | NULL   | no     |
//	| a NOT IN ('x')        | NULL   | no     |
//	| a NOT BETWEEN 1 AND 2 | NULL   | no     |
//	| a IS NULL             | TRUE   | yes    |
//	| a IS NOT NULL         | FALSE  | no     |
//	| a CONTAINS 'x'        | FALSE  | no     |
//	| NOT (a CONTAINS 'x')  | TRUE   | yes    |
//	| a = 1 OR b = 2        | b = 2, | if b=2 |
//	|                       | or NULL|        |
//	| a = 1 AND b = 2       | NULL,  | no     |
//	|                       | FALSE  |        |
//	+-----------------------+--------+--------+
//
// # Differences from RocketMQ
//
// The semantics above are RocketMQ's (its filter module, 5.x) except where
// RocketMQ's behaviour is an accident of its implementation:
//
//  1. NOT binds looser than comparisons, as in SQL. RocketMQ parses
//     NOT a = 1 as (NOT a) = 1, which never matches, and rejects
//     NOT a > 1. Expressions RocketMQ accepts and can match mean the same.
//  2. A comparison with NULL is NULL on either side. RocketMQ makes
//     'x' = a FALSE (not NULL) when a is absent, so NOT ('x' = a) matched.
//  3. Text that does not read as a number, compared with a number, makes
//     that comparison unequal (=, <>) or NULL (ordering). RocketMQ aborts
//     the whole evaluation, so nothing matches, not even under OR. Text
//     such as "5.0" equals the long 5 here; RocketMQ fails it.
//  4. Trailing input after a complete expression is an error; RocketMQ
//     ignores it.
//  5. The float literal 0.0 is accepted; RocketMQ rejects float literals
//     below Double.MIN_VALUE, zero among them.
//  6. NOT BETWEEN checks its literal bounds like BETWEEN, and 1 = TRUE is
//     rejected like TRUE = 1.
//  7. A -- comment may end the input without a line break.
//  8. NOT cannot stand as an operand (a = NOT b); parenthesise it.
//
// # Invariants
//
//  1. Compile never panics, runs in time linear in its input, and recurses
//     at most MaxDepth levels; inputs longer than MaxExprLen are refused.
//  2. An *Expr is immutable: Eval, String and the Filter methods are safe
//     for concurrent use.
//  3. Eval does not allocate. It looks each referenced property up once
//     (through message.Properties), parses numbers from the property bytes
//     in place, and compares against literals converted at compile time.
//     The one exception: text between the largest double and 1e309 makes
//     strconv allocate its range error.
//  4. Eval recurses at most MaxDepth levels and never panics on any
//     properties bytes.
//  5. Compile(e.String()) succeeds and gives an expression that prints
//     the same and evaluates the same as e.
//  6. Eval is true exactly when the expression is TRUE.
package sql92
