//! What the command line prints: JSON, aligned tables, one-line errors and
//! the exit status.

use std::error::Error as _;
use std::process::ExitCode;

use serde::Serialize;
use serde_json::Value;

/// Writes a line to standard output; a closed pipe (`queen … | head`) ends
/// the program quietly instead of panicking.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes to standard output, exiting with status 0 once the reader has gone.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("queen: error: write standard output: {e}");
        std::process::exit(1);
    }
}

/// Exit status of a user error: bad flags or input, or a request the broker refused (4xx).
const EXIT_USER: u8 = 1;
/// Exit status when no broker could be reached, or one answered 5xx.
const EXIT_UNREACHABLE: u8 = 2;
/// Exit status of a refused token or role (401, 403).
const EXIT_AUTH: u8 = 3;
/// Exit status of a pop or look-up that found nothing.
const EXIT_EMPTY: u8 = 4;

/// Why a command did not succeed, and with which exit status it ends.
#[derive(Debug)]
pub enum Failure {
    /// Bad usage or bad input, nothing was sent: status 1.
    Usage(String),
    /// The broker refused (a 4xx, a refused item or ack): status 1.
    Error(String),
    /// No broker reached, or one answered 5xx or could not use its database: status 2.
    Unreachable(String),
    /// The broker refused the token or its role (401, 403): status 3.
    Auth(String),
    /// A pop or a look-up found nothing: status 4.
    Empty,
}

impl Failure {
    /// Prints the one-line message (if any) and returns the exit status.
    pub fn report(self) -> ExitCode {
        let (code, text) = match self {
            Self::Usage(m) => (EXIT_USER, format!("queen: {m}")),
            Self::Error(m) => (EXIT_USER, format!("queen: error: {m}")),
            Self::Unreachable(m) => (EXIT_UNREACHABLE, format!("queen: error: {m}")),
            Self::Auth(m) => (EXIT_AUTH, format!("queen: error: {m}")),
            Self::Empty => return ExitCode::from(EXIT_EMPTY),
        };
        eprintln!("{text}");
        ExitCode::from(code)
    }

    /// The failure of the class `e` belongs to, with `text` as its message.
    pub fn like(e: &queen_client::Error, text: String) -> Self {
        use queen_client::Error;
        match e {
            Error::InvalidInput(_) | Error::Config(_) => Self::Usage(text),
            Error::Status {
                status: 401 | 403, ..
            } => Self::Auth(text),
            Error::Status { status, .. } if *status >= 500 => Self::Unreachable(text),
            Error::Status { .. } | Error::TransactionFailed { .. } | Error::Json(_) => {
                Self::Error(text)
            }
            _ => Self::Unreachable(text),
        }
    }
}

impl From<queen_client::Error> for Failure {
    fn from(e: queen_client::Error) -> Self {
        let text = match &e {
            queen_client::Error::InvalidInput(m) | queen_client::Error::Config(m) => m.clone(),
            other => one_line(other),
        };
        Self::like(&e, text)
    }
}

/// The innermost cause of an error: for a refused connection, "Connection refused".
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// An error on one line, naming what failed and the root cause.
/// The failure of an ack after the messages were printed: the same class as
/// the client error, saying that what was printed is not acked.
pub fn printed_not_acked(e: queen_client::Error) -> Failure {
    let text = format!("the messages were printed but not acked: {}", one_line(&e));
    Failure::like(&e, text)
}

pub fn one_line(e: &queen_client::Error) -> String {
    use queen_client::Error;
    let text = match e {
        Error::Connect { url, source } => format!("cannot connect to {url}: {}", root_cause(&**source)),
        Error::Transport { url, source } => format!("connection to {url} failed: {}", root_cause(&**source)),
        Error::Status {
            status: 404,
            method,
            path,
            message,
            ..
        } if message == "Not found" => format!(
            "the broker has no route {method} {}: it answered 404 (this broker version does not support the command)",
            path.split('?').next().unwrap_or(path)
        ),
        Error::Status {
            status: status @ (401 | 403),
            message,
            ..
        } => format!("{message} (HTTP {status}; give a token with the rights needed: --token or QUEEN_TOKEN)"),
        other => {
            let mut s = other.to_string();
            if let Some(src) = other.source() {
                s = format!("{s}: {}", root_cause(src));
            }
            s
        }
    };
    text.replace(['\n', '\r'], " ")
}

/// How a command prints what it read (`-o`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns and sentences, long cells cut.
    #[default]
    Table,
    /// The table with more columns, nothing cut.
    Wide,
    /// Pretty JSON with the broker's field names.
    Json,
    /// One compact JSON value per line: the rows of a listing.
    Ndjson,
    /// YAML.
    Yaml,
}

impl Format {
    /// Whether the output is for people (a table or sentences).
    pub fn is_human(self) -> bool {
        matches!(self, Self::Table | Self::Wide)
    }

    pub fn is_wide(self) -> bool {
        self == Self::Wide
    }
}

/// Prints `v` as JSON, YAML or JSON lines; for the human formats, nothing.
/// With JSON lines, a list is one line per element; `rows` (a JSON pointer)
/// names the list inside an object, else the object is one line.
pub fn machine(v: &Value, format: Format, rows: &str) -> Result<(), Failure> {
    let fail = |e: &dyn std::fmt::Display| Failure::Error(format!("print the answer: {e}"));
    match format {
        Format::Table | Format::Wide => {}
        Format::Json => {
            let text = serde_json::to_string_pretty(v).map_err(|e| fail(&e))?;
            crate::outln!("{text}");
        }
        Format::Yaml => {
            let text = serde_yaml_ng::to_string(v).map_err(|e| fail(&e))?;
            write_out(format_args!("{text}"));
        }
        Format::Ndjson => {
            let list = if v.is_array() {
                Some(v)
            } else {
                v.pointer(rows).filter(|_| !rows.is_empty())
            };
            match list.and_then(Value::as_array) {
                Some(items) => {
                    for item in items {
                        crate::outln!("{item}");
                    }
                }
                None => crate::outln!("{v}"),
            }
        }
    }
    Ok(())
}

/// Prints `v` in `format`: machine formats through [`machine`], the human
/// ones through `human(v, wide)`.
pub fn show(
    v: &Value,
    format: Format,
    rows: &str,
    human: impl FnOnce(&Value, bool),
) -> Result<(), Failure> {
    if format.is_human() {
        human(v, format.is_wide());
        Ok(())
    } else {
        machine(v, format, rows)
    }
}

/// Prints any serializable answer in a machine format (see [`machine`]).
pub fn print(v: &impl Serialize, format: Format, rows: &str) -> Result<(), Failure> {
    let v = serde_json::to_value(v).map_err(|e| Failure::Error(e.to_string()))?;
    machine(&v, format, rows)
}

/// A JSON value as table cell text: strings bare, `null` as `-`, the rest compact.
pub fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Longest cell printed in a table; longer text is cut with an ellipsis.
const MAX_CELL_CHARS: usize = 60;

/// A table of rows printed with aligned columns.
#[derive(Debug)]
pub struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
    cut: bool,
}

impl Table {
    pub fn new(header: &[&'static str]) -> Self {
        Self {
            header: header.to_vec(),
            rows: Vec::new(),
            cut: true,
        }
    }

    /// A table whose cells are never cut (`-o wide`) when `wide`.
    pub fn wide(mut self, wide: bool) -> Self {
        self.cut = !wide;
        self
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(
            cells
                .into_iter()
                .map(|c| c.replace(['\n', '\r', '\t'], " "))
                .collect(),
        );
    }

    /// A cell as printed: cut with an ellipsis past [`MAX_CELL_CHARS`] unless wide.
    fn shown(&self, c: &str) -> String {
        if self.cut && c.chars().count() > MAX_CELL_CHARS {
            let cut: String = c.chars().take(MAX_CELL_CHARS - 1).collect();
            format!("{cut}…")
        } else {
            c.to_owned()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row, columns two spaces apart.
    pub fn render(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(|c| self.shown(c)).collect())
            .collect();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &rows {
            for (i, c) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(c.chars().count());
                }
            }
        }
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut out = String::new();
            for (i, c) in cells.enumerate() {
                if i > 0 {
                    out.push_str("  ");
                }
                out.push_str(c);
                let pad = widths
                    .get(i)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(c.chars().count());
                out.extend(std::iter::repeat_n(' ', pad));
            }
            out.trim_end().to_owned()
        };
        let mut out = line(&mut self.header.iter().copied());
        for row in &rows {
            out.push('\n');
            out.push_str(&line(&mut row.iter().map(String::as_str)));
        }
        out
    }

    /// Prints the table, or `empty` when it has no rows.
    pub fn print_or(&self, empty: &str) {
        if self.is_empty() {
            crate::outln!("{empty}");
        } else {
            crate::outln!("{}", self.render());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns_and_cut_long_cells() {
        let mut t = Table::new(&["NAME", "N"]);
        t.row(vec!["orders".into(), "1".into()]);
        t.row(vec!["x".into(), "12345".into()]);
        assert_eq!(t.render(), "NAME    N\norders  1\nx       12345");
        let mut t = Table::new(&["DATA"]);
        t.row(vec!["y".repeat(100)]);
        let line = t.render().lines().nth(1).unwrap().to_owned();
        assert_eq!(line.chars().count(), MAX_CELL_CHARS);
        assert!(line.ends_with('…'));
    }

    #[test]
    fn cells_show_strings_bare_and_null_as_dash() {
        assert_eq!(cell(&serde_json::json!("a")), "a");
        assert_eq!(cell(&Value::Null), "-");
        assert_eq!(cell(&serde_json::json!({"a": 1})), r#"{"a":1}"#);
    }

    #[test]
    fn client_errors_map_to_the_exit_status_classes() {
        let status = |code: u16| queen_client::Error::Status {
            method: "GET".into(),
            path: "/x".into(),
            status: code,
            message: "m".into(),
            code: None,
            retry_after: None,
        };
        let class = |e: queen_client::Error| match Failure::from(e) {
            Failure::Usage(_) | Failure::Error(_) => EXIT_USER,
            Failure::Unreachable(_) => EXIT_UNREACHABLE,
            Failure::Auth(_) => EXIT_AUTH,
            Failure::Empty => EXIT_EMPTY,
        };
        assert_eq!(class(status(400)), EXIT_USER);
        assert_eq!(class(status(404)), EXIT_USER);
        assert_eq!(class(status(409)), EXIT_USER);
        assert_eq!(class(status(401)), EXIT_AUTH);
        assert_eq!(class(status(403)), EXIT_AUTH);
        assert_eq!(class(status(500)), EXIT_UNREACHABLE);
        assert_eq!(class(status(503)), EXIT_UNREACHABLE);
        let refused = queen_client::Error::Connect {
            url: "http://127.0.0.1:1".into(),
            source: "refused".into(),
        };
        assert_eq!(class(refused), EXIT_UNREACHABLE);
        let timeout = queen_client::Error::Timeout {
            url: "u".into(),
            timeout: std::time::Duration::from_secs(1),
        };
        assert_eq!(class(timeout), EXIT_UNREACHABLE);
        assert_eq!(
            class(queen_client::Error::Unavailable("db".into())),
            EXIT_UNREACHABLE
        );
        assert_eq!(
            class(queen_client::Error::InvalidInput("q".into())),
            EXIT_USER
        );
    }

    #[test]
    fn connection_errors_fit_on_one_line() {
        let e = queen_client::Error::Status {
            method: "POST".into(),
            path: "/api/v1/messages/p/t/retry".into(),
            status: 404,
            message: "Not found".into(),
            code: None,
            retry_after: None,
        };
        let text = one_line(&e);
        assert!(
            text.contains("no route POST /api/v1/messages/p/t/retry"),
            "{text}"
        );
        assert!(!text.contains('\n'));
    }
}
