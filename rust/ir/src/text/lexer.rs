//! The tokenizer of jaxpr text.
//!
//! Tokens are single-character punctuation (`{ } ( ) [ ] , ; = : .`), quoted strings, and
//! *words*: maximal runs of characters that are not whitespace, not punctuation and not
//! control characters. Words cover variable names (`a`, `bc`, `_`), keywords (`lambda`,
//! `let`, `in`), primitive and param names, numbers (`1`, `-3`, `2.0`, `1e-05`, `inf`),
//! dtypes (`f32`) and bare param values (`<lambda>`, `Precision.HIGHEST`). A `.` is a word
//! character inside a word but a token of its own at the start of one (so `f32[8]. let`
//! and `{ lambda ; . let` both give a `.` token).
//!
//! The lexer works on bytes and only ever stops at ASCII bytes, so every token's text is
//! a valid `&str` slice of the input; columns count characters (UTF-8 continuation bytes
//! are not counted).

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    LBrace,
    RBrace,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Semi,
    Eq,
    Colon,
    Dot,
    /// A word (see the module docs).
    Word,
    /// A quoted string, quotes included in the text.
    Str,
    /// Something that cannot start a token; the payload says what.
    Bad(&'static str),
    /// The end of the input.
    Eof,
}

/// One token with its position.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tok<'a> {
    pub kind: Kind,
    pub text: &'a str,
    /// Byte offset of the first byte.
    pub start: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub col: usize,
    /// True when no earlier token is on the same line.
    pub line_start: bool,
}

impl Tok<'_> {
    /// The token as an error message shows it: `'text'` (shortened), or a description.
    pub fn describe(&self) -> String {
        match self.kind {
            Kind::Eof => "end of input".to_owned(),
            Kind::Bad(what) => {
                let c = self.text.chars().next().unwrap_or('?');
                format!("{what} {:?} (U+{:04X})", c, c as u32)
            }
            _ => {
                let mut s = String::from("'");
                for (n, c) in self.text.chars().enumerate() {
                    if n == 40 {
                        s.push_str("...");
                        break;
                    }
                    s.push(c);
                }
                s.push('\'');
                s
            }
        }
    }

    /// True for a word with exactly this text.
    #[inline]
    pub fn is_word(&self, text: &str) -> bool {
        self.kind == Kind::Word && self.text == text
    }
}

/// True for bytes that end a word (whitespace, punctuation, quotes, control characters).
#[inline]
fn ends_word(b: u8) -> bool {
    matches!(
        b,
        b'{' | b'}' | b'(' | b')' | b'[' | b']' | b',' | b';' | b'=' | b':' | b'\'' | b'"'
    ) || b <= b' '
        || b == 0x7f
}

/// Produces tokens one at a time (a clone resumes from the same place).
#[derive(Clone)]
pub(crate) struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    line: usize,
    col: usize,
    last_token_line: usize,
}

impl<'a> Lexer<'a> {
    pub fn new(src: &'a str) -> Lexer<'a> {
        Lexer {
            src,
            bytes: src.as_bytes(),
            pos: 0,
            line: 1,
            col: 1,
            last_token_line: 0,
        }
    }

    /// The whole input.
    pub fn source(&self) -> &'a str {
        self.src
    }

    /// A lexer resuming just after the one-character token `t` of `src` (a token that
    /// holds no newline).
    pub fn after(src: &'a str, t: &Tok<'a>) -> Lexer<'a> {
        Lexer {
            src,
            bytes: src.as_bytes(),
            pos: (t.start + t.text.len()).min(src.len()),
            line: t.line,
            col: t.col + t.text.chars().count(),
            last_token_line: t.line,
        }
    }

    /// Advances over raw text up to byte `end` (a character boundary), counting lines
    /// and columns; the next token starts there.
    pub fn skip_raw_to(&mut self, end: usize) {
        let end = end.min(self.bytes.len());
        while self.pos < end {
            if self.bytes[self.pos] == b'\n' {
                self.pos += 1;
                self.line += 1;
                self.col = 1;
            } else {
                self.advance(1);
            }
        }
    }

    /// Advances over `n` bytes known not to contain a newline, counting characters.
    #[inline]
    fn advance(&mut self, n: usize) {
        let end = (self.pos + n).min(self.bytes.len());
        for &b in &self.bytes[self.pos..end] {
            if b & 0xC0 != 0x80 {
                self.col += 1;
            }
        }
        self.pos = end;
    }

    fn skip_space(&mut self) {
        while let Some(&b) = self.bytes.get(self.pos) {
            match b {
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                    self.col = 1;
                }
                b' ' | b'\t' | b'\r' | 0x0b | 0x0c => {
                    self.pos += 1;
                    self.col += 1;
                }
                _ => break,
            }
        }
    }

    fn slice(&self, start: usize, end: usize) -> &'a str {
        // `start` and `end` are always at ASCII bytes or the ends of the input, hence at
        // character boundaries; `get` keeps this panic-free regardless.
        self.src.get(start..end).unwrap_or("")
    }

    /// The next token (`Eof` forever at the end).
    pub fn next_token(&mut self) -> Tok<'a> {
        self.skip_space();
        let start = self.pos;
        let (line, col) = (self.line, self.col);
        let line_start = line != self.last_token_line;
        self.last_token_line = line;
        let mk = |kind: Kind, text: &'a str| Tok {
            kind,
            text,
            start,
            line,
            col,
            line_start,
        };
        let Some(&b) = self.bytes.get(start) else {
            return mk(Kind::Eof, "");
        };
        let single = match b {
            b'{' => Some(Kind::LBrace),
            b'}' => Some(Kind::RBrace),
            b'(' => Some(Kind::LParen),
            b')' => Some(Kind::RParen),
            b'[' => Some(Kind::LBracket),
            b']' => Some(Kind::RBracket),
            b',' => Some(Kind::Comma),
            b';' => Some(Kind::Semi),
            b'=' => Some(Kind::Eq),
            b':' => Some(Kind::Colon),
            b'.' => Some(Kind::Dot),
            _ => None,
        };
        if let Some(kind) = single {
            self.advance(1);
            return mk(kind, self.slice(start, start + 1));
        }
        if b == b'\'' || b == b'"' {
            return self.quoted(b, start, line, col, line_start);
        }
        if ends_word(b) {
            // A control character (whitespace was skipped above).
            self.advance(1);
            return mk(
                Kind::Bad("unexpected character"),
                self.slice(start, start + 1),
            );
        }
        let mut end = start;
        while let Some(&c) = self.bytes.get(end) {
            if ends_word(c) {
                break;
            }
            end += 1;
        }
        self.advance(end - start);
        mk(Kind::Word, self.slice(start, end))
    }

    fn quoted(
        &mut self,
        quote: u8,
        start: usize,
        line: usize,
        col: usize,
        line_start: bool,
    ) -> Tok<'a> {
        let mut end = start + 1;
        loop {
            match self.bytes.get(end) {
                None | Some(b'\n') => {
                    self.advance(end - start);
                    return Tok {
                        kind: Kind::Bad("unterminated string starting with"),
                        text: self.slice(start, start + 1),
                        start,
                        line,
                        col,
                        line_start,
                    };
                }
                Some(b'\\') => {
                    // Skip the escaped byte unless it is a newline (reported above).
                    end += 1;
                    if matches!(self.bytes.get(end), Some(&c) if c != b'\n') {
                        // A non-ASCII escaped character: skip its continuation bytes too.
                        end += 1;
                        while matches!(self.bytes.get(end), Some(&c) if c & 0xC0 == 0x80) {
                            end += 1;
                        }
                    }
                }
                Some(&c) if c == quote => {
                    end += 1;
                    break;
                }
                Some(_) => end += 1,
            }
        }
        self.advance(end - start);
        Tok {
            kind: Kind::Str,
            text: self.slice(start, end),
            start,
            line,
            col,
            line_start,
        }
    }
}

/// Decodes a quoted string token (Python-style escapes: `\\ \' \" \n \t \r \0 \xNN
/// \uNNNN \UNNNNNNNN`). `None` for a malformed escape.
pub(crate) fn unquote(text: &str) -> Option<String> {
    let mut chars = text.chars();
    let quote = chars.next()?;
    let mut out = String::new();
    loop {
        let c = chars.next()?;
        if c == quote {
            return if chars.next().is_none() {
                Some(out)
            } else {
                None
            };
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next()?;
        let hex = |chars: &mut std::str::Chars<'_>, n: usize| -> Option<char> {
            let mut v: u32 = 0;
            for _ in 0..n {
                v = v.checked_mul(16)? + chars.next()?.to_digit(16)?;
            }
            char::from_u32(v)
        };
        match e {
            '\\' | '\'' | '"' => out.push(e),
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            '0' => out.push('\0'),
            'x' => out.push(hex(&mut chars, 2)?),
            'u' => out.push(hex(&mut chars, 4)?),
            'U' => out.push(hex(&mut chars, 8)?),
            _ => return None,
        }
    }
}

/// Quotes a string so that [`unquote`] reads it back (single quotes, Python style).
pub(crate) fn quote_into(out: &mut String, s: &str) {
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('\'');
}

/// True when `s` lexes as exactly one word token.
pub(crate) fn is_single_word(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && b[0] != b'.' && !b.iter().any(|&c| ends_word(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<(Kind, String)> {
        let mut lx = Lexer::new(s);
        let mut v = Vec::new();
        loop {
            let t = lx.next_token();
            if t.kind == Kind::Eof {
                return v;
            }
            v.push((t.kind, t.text.to_owned()));
        }
    }

    #[test]
    fn words_and_punctuation() {
        let k = kinds("{ lambda ; a:f32[3,4]. let b:f32[] = add a 2.0:f32[] in (b,) }");
        let texts: Vec<&str> = k.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(
            texts,
            [
                "{", "lambda", ";", "a", ":", "f32", "[", "3", ",", "4", "]", ".", "let", "b", ":",
                "f32", "[", "]", "=", "add", "a", "2.0", ":", "f32", "[", "]", "in", "(", "b", ",",
                ")", "}"
            ]
        );
        assert_eq!(k[11].0, Kind::Dot);
    }

    #[test]
    fn positions_count_characters() {
        let mut lx = Lexer::new("é\n  ab é x");
        let t = lx.next_token();
        assert_eq!((t.line, t.col, t.text), (1, 1, "é"));
        let t = lx.next_token();
        assert_eq!((t.line, t.col, t.text, t.line_start), (2, 3, "ab", true));
        let t = lx.next_token();
        assert_eq!((t.line, t.col, t.line_start), (2, 6, false));
        let t = lx.next_token();
        assert_eq!((t.line, t.col), (2, 8));
    }

    #[test]
    fn strings() {
        assert_eq!(unquote(r"'a\'b\\c\x41'").as_deref(), Some("a'b\\cA"));
        let mut s = String::new();
        quote_into(&mut s, "it's\n\u{1}");
        assert_eq!(unquote(&s).as_deref(), Some("it's\n\u{1}"));
        let k = kinds("'abc");
        assert!(matches!(k[0].0, Kind::Bad(_)));
    }
}
