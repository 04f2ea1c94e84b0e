//! How a scenario case is written: `/`-separated tokens, parsed into a Case.

use anyhow::{bail, Context as _, Result};

use crate::load::PushBody;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    Max,
    Fixed(f64),
    HalfOfMax(f64),
}

/// A parsed case: `b100/n16/c16/p64/r50%`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Case {
    pub head: Option<String>,
    pub b: Option<u32>,
    pub n: Option<u32>,
    pub c: Option<u32>,
    pub p: Option<u32>,
    pub g: Option<u32>,
    pub m: Option<u64>,
    pub s: Option<f64>,
    pub r: Option<Rate>,
    /// `pnew`: every push batch goes to a partition of its own, created by
    /// that push (one lane per entity, none made beforehand).
    pub fresh: bool,
    /// `anon`: pushes carry no transactionId (the broker mints one); the
    /// message's number travels in its payload.
    pub anon: bool,
    /// `bin` / `binz`: Queen's pushes as the binary body, plain or zstd
    /// frames (peers ignore it).
    pub body: PushBody,
    /// `maxsizeN`: Queen's queue is configured with `maxSize` N before the
    /// load (push cases; peers ignore it).
    pub max_size: Option<u64>,
}

impl Case {
    /// The partition and transactionId tokens of a case's id: `p16` or
    /// `pnew`, then `/anon` when pushes carry no transactionId, `/bin` or
    /// `/binz` when Queen's pushes are binary bodies, `/maxsizeN` when its
    /// queue is bounded.
    pub fn shape_id(&self, partitions: u32) -> String {
        let mut id = if self.fresh {
            "pnew".to_owned()
        } else {
            format!("p{partitions}")
        };
        if self.anon {
            id.push_str("/anon");
        }
        if self.body != PushBody::Json {
            id.push('/');
            id.push_str(self.body.token());
        }
        if let Some(n) = self.max_size {
            id.push_str(&format!("/maxsize{n}"));
        }
        id
    }
}

pub fn parse_case(text: &str) -> Result<Case> {
    let mut case = Case::default();
    for (i, tok) in text.split('/').map(str::trim).enumerate() {
        let Some(key) = tok.chars().next() else {
            bail!("empty token in case {text:?}");
        };
        match tok {
            "pnew" => {
                case.fresh = true;
                continue;
            }
            "anon" => {
                case.anon = true;
                continue;
            }
            "bin" => {
                case.body = PushBody::Binary;
                continue;
            }
            "binz" => {
                case.body = PushBody::BinaryZstd;
                continue;
            }
            t if t.starts_with("maxsize") => {
                let n = t["maxsize".len()..]
                    .parse()
                    .with_context(|| format!("bad number in {tok:?} of case {text:?}"))?;
                case.max_size = Some(n);
                continue;
            }
            _ => {}
        }
        if i == 0 && tok.len() > 1 && tok != "rmax" && tok.bytes().all(|b| b.is_ascii_alphabetic())
        {
            case.head = Some(tok.to_owned());
            continue;
        }
        let val = &tok[key.len_utf8()..];
        let num = || -> Result<u64> {
            val.parse()
                .with_context(|| format!("bad number in {tok:?} of case {text:?}"))
        };
        let small = || -> Result<u32> { Ok(u32::try_from(num()?)?.max(1)) };
        match key {
            'b' => case.b = Some(small()?),
            'n' => case.n = Some(small()?),
            'c' if !val.is_empty() && val.bytes().all(|b| b.is_ascii_digit()) => {
                case.c = Some(small()?);
            }
            'p' => case.p = Some(small()?),
            'g' => case.g = Some(small()?),
            'm' => case.m = Some(num()?.max(1)),
            's' => {
                case.s = Some(
                    val.parse()
                        .with_context(|| format!("bad seconds in case {text:?}"))?,
                );
            }
            'r' if val == "max" => case.r = Some(Rate::Max),
            'r' if val.ends_with('%') => {
                let pct: f64 = val
                    .trim_end_matches('%')
                    .parse()
                    .with_context(|| format!("bad rate in case {text:?}"))?;
                case.r = Some(Rate::HalfOfMax(pct / 100.0));
            }
            'r' => case.r = Some(Rate::Fixed(num()? as f64)),
            _ => bail!("unknown token {tok:?} in case {text:?}"),
        }
    }
    Ok(case)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_parse() {
        let c = parse_case("b100/n16/c8/p10000/r50%").unwrap();
        assert_eq!(
            (c.b, c.n, c.c, c.p, c.r),
            (
                Some(100),
                Some(16),
                Some(8),
                Some(10000),
                Some(Rate::HalfOfMax(0.5))
            )
        );
        let c = parse_case("commit/c64/p64").unwrap();
        assert_eq!(c.head.as_deref(), Some("commit"));
        assert_eq!(c.c, Some(64));
        assert_eq!(parse_case("b1/rmax").unwrap().r, Some(Rate::Max));
        assert_eq!(
            parse_case("b1/r50000/s2.5/m10").unwrap(),
            Case {
                b: Some(1),
                r: Some(Rate::Fixed(50000.0)),
                s: Some(2.5),
                m: Some(10),
                ..Case::default()
            }
        );
        let c = parse_case("b1/n16/pnew/anon/rmax").unwrap();
        assert!(c.fresh && c.anon && c.p.is_none());
        assert_eq!(
            parse_case("b100/n16/p64/bin").unwrap().body,
            PushBody::Binary
        );
        assert_eq!(parse_case("binz/b100").unwrap().body, PushBody::BinaryZstd);
        assert_eq!(parse_case("b100").unwrap().body, PushBody::Json);
        assert!(parse_case("b100/x3").is_err());
        assert!(parse_case("b100/bx").is_err());
        assert_eq!(parse_case("rows/b1").unwrap().head.as_deref(), Some("rows"));
        let c = parse_case("b100/n16/p16/maxsize5000000").unwrap();
        assert_eq!(c.max_size, Some(5_000_000));
        assert_eq!(c.shape_id(16), "p16/maxsize5000000");
        assert!(parse_case("b100/maxsize").is_err());
    }
}
