//! Integer size expressions for launch shapes, buffer shapes, scalars and
//! work counts: `cdiv(N, 32)`, `2*M*N*K`, `max(1, N/4)`.
//!
//! Hand-written rather than a crate: the grammar is six operators, three
//! functions and names, it must use checked 64-bit integer arithmetic (an
//! overflowing grid is an error, not a wrapped number), and general-purpose
//! evaluators (evalexpr, meval) bring floats, strings and assignment we would
//! have to forbid again. Bounded: at most 512 characters and 32 levels of
//! nesting, so no input can exhaust the stack.

use std::collections::BTreeMap;

/// Variables an expression may name (the sizes of one sweep point).
pub type Vars = BTreeMap<String, i64>;

const MAX_LEN: usize = 512;
const MAX_DEPTH: usize = 32;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(i64),
    Name(String),
    Op(char),
    Pow,
    LParen,
    RParen,
    Comma,
}

fn lex(text: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '_') {
                i += 1;
            }
            let digits: String = chars[start..i].iter().filter(|c| **c != '_').collect();
            let n = digits
                .parse::<i64>()
                .map_err(|_| format!("number `{digits}` is too large"))?;
            out.push(Tok::Num(n));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Name(chars[start..i].iter().collect()));
        } else if c == '*' && chars.get(i + 1) == Some(&'*') {
            out.push(Tok::Pow);
            i += 2;
        } else {
            out.push(match c {
                '+' | '-' | '*' | '/' | '%' => Tok::Op(c),
                '(' => Tok::LParen,
                ')' => Tok::RParen,
                ',' => Tok::Comma,
                _ => return Err(format!("unexpected character `{c}`")),
            });
            i += 1;
        }
    }
    Ok(out)
}

struct Parser<'a> {
    toks: Vec<Tok>,
    pos: usize,
    vars: &'a Vars,
    depth: usize,
}

fn overflow() -> String {
    "arithmetic overflow (the value does not fit in 64 bits)".into()
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn expect(&mut self, want: Tok, what: &str) -> Result<(), String> {
        match self.next() {
            Some(t) if t == want => Ok(()),
            _ => Err(format!("expected {what}")),
        }
    }

    // sum := term (('+' | '-') term)*
    fn sum(&mut self) -> Result<i64, String> {
        let mut v = self.term()?;
        while let Some(Tok::Op(op @ ('+' | '-'))) = self.peek().cloned() {
            self.pos += 1;
            let r = self.term()?;
            v = if op == '+' {
                v.checked_add(r)
            } else {
                v.checked_sub(r)
            }
            .ok_or_else(overflow)?;
        }
        Ok(v)
    }

    // term := power (('*' | '/' | '%') power)*
    fn term(&mut self) -> Result<i64, String> {
        let mut v = self.power()?;
        while let Some(Tok::Op(op @ ('*' | '/' | '%'))) = self.peek().cloned() {
            self.pos += 1;
            let r = self.power()?;
            v = match op {
                '*' => v.checked_mul(r).ok_or_else(overflow)?,
                _ if r == 0 => return Err("division by zero".into()),
                '/' => v.checked_div_euclid(r).ok_or_else(overflow)?,
                _ => v.checked_rem_euclid(r).ok_or_else(overflow)?,
            };
        }
        Ok(v)
    }

    // power := unary ('**' power)?
    fn power(&mut self) -> Result<i64, String> {
        let base = self.unary()?;
        if self.peek() == Some(&Tok::Pow) {
            self.pos += 1;
            let e = self.power()?;
            let e = u32::try_from(e).map_err(|_| "exponent must be 0..=63".to_string())?;
            return base.checked_pow(e).ok_or_else(overflow);
        }
        Ok(base)
    }

    fn unary(&mut self) -> Result<i64, String> {
        if self.peek() == Some(&Tok::Op('-')) {
            self.pos += 1;
            return self.unary()?.checked_neg().ok_or_else(overflow);
        }
        if self.peek() == Some(&Tok::Op('+')) {
            self.pos += 1;
            return self.unary();
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<i64, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("nested more than {MAX_DEPTH} levels"));
        }
        let v = match self.next() {
            Some(Tok::Num(n)) => n,
            Some(Tok::LParen) => {
                let v = self.sum()?;
                self.expect(Tok::RParen, "`)`")?;
                v
            }
            Some(Tok::Name(name)) if self.peek() == Some(&Tok::LParen) => {
                self.pos += 1;
                let mut args = vec![self.sum()?];
                while self.peek() == Some(&Tok::Comma) {
                    self.pos += 1;
                    args.push(self.sum()?);
                }
                self.expect(Tok::RParen, "`)` after the function's arguments")?;
                call(&name, &args)?
            }
            Some(Tok::Name(name)) => *self.vars.get(&name).ok_or_else(|| {
                let known: Vec<&str> = self.vars.keys().map(String::as_str).collect();
                if known.is_empty() {
                    format!("unknown name `{name}` (no sizes are defined: add them to `sizes`)")
                } else {
                    format!("unknown name `{name}` (sizes: {})", known.join(", "))
                }
            })?,
            Some(t) => return Err(format!("unexpected {t:?}")),
            None => return Err("unexpected end".into()),
        };
        self.depth -= 1;
        Ok(v)
    }
}

fn call(name: &str, args: &[i64]) -> Result<i64, String> {
    match (name, args) {
        ("cdiv", [a, b]) => {
            if *b <= 0 {
                return Err("cdiv needs a positive divisor".into());
            }
            a.checked_add(b - 1)
                .map(|x| x.div_euclid(*b))
                .ok_or_else(overflow)
        }
        ("min", [first, rest @ ..]) => Ok(rest.iter().fold(*first, |m, x| m.min(*x))),
        ("max", [first, rest @ ..]) => Ok(rest.iter().fold(*first, |m, x| m.max(*x))),
        ("cdiv", _) => Err("cdiv takes two arguments: cdiv(a, b)".into()),
        _ => Err(format!(
            "unknown function `{name}` (use cdiv(a, b), min(...), max(...))"
        )),
    }
}

/// Evaluate `text` with `vars`. Errors say what is wrong, without the text
/// (callers name the field).
pub fn eval(text: &str, vars: &Vars) -> Result<i64, String> {
    if text.len() > MAX_LEN {
        return Err(format!("longer than {MAX_LEN} characters"));
    }
    let toks = lex(text)?;
    if toks.is_empty() {
        return Err("empty expression".into());
    }
    let mut p = Parser {
        toks,
        pos: 0,
        vars,
        depth: 0,
    };
    let v = p.sum()?;
    if p.pos != p.toks.len() {
        return Err(format!(
            "unexpected {:?} after the expression",
            p.toks[p.pos]
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        [("N".to_string(), 4096), ("M".to_string(), 1000)].into()
    }

    #[test]
    fn arithmetic_functions_and_names() {
        let v = vars();
        assert_eq!(eval("cdiv(N, 32)", &v), Ok(128));
        assert_eq!(eval("cdiv(M, 32)", &v), Ok(32));
        assert_eq!(eval("2*M*N*4", &v), Ok(2 * 1000 * 4096 * 4));
        assert_eq!(eval("(N + 255) / 256", &v), Ok(16));
        assert_eq!(eval("N % 1000", &v), Ok(96));
        assert_eq!(eval("2**10 - -3", &v), Ok(1027));
        assert_eq!(eval("min(N, M, 7)", &v), Ok(7));
        assert_eq!(eval("max(1, M/4096)", &v), Ok(1));
        assert_eq!(eval("1_000 * 3", &v), Ok(3000));
        assert_eq!(eval("2*3+4", &v), Ok(10));
        assert_eq!(eval("2*(3+4)", &v), Ok(14));
    }

    #[test]
    fn errors_are_explained() {
        let v = vars();
        assert!(eval("K * 2", &v).unwrap_err().contains("unknown name `K`"));
        assert!(eval("N / 0", &v).unwrap_err().contains("division by zero"));
        assert!(eval("N ** 40", &v).unwrap_err().contains("overflow"));
        assert!(
            eval("9223372036854775807 + 1", &v)
                .unwrap_err()
                .contains("overflow")
        );
        assert!(
            eval("sqrt(N)", &v)
                .unwrap_err()
                .contains("unknown function")
        );
        assert!(eval("cdiv(N)", &v).unwrap_err().contains("two arguments"));
        assert!(eval("(N", &v).unwrap_err().contains("`)`"));
        assert!(eval("N N", &v).is_err());
        assert!(
            eval("N; rm -rf /", &v)
                .unwrap_err()
                .contains("unexpected character")
        );
        assert!(eval("", &v).is_err());
        let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert!(eval(&deep, &v).unwrap_err().contains("nested"));
        assert!(eval(&"1+".repeat(400), &v).unwrap_err().contains("longer"));
    }
}
