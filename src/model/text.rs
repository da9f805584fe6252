//! Text that came from the traced programs (comm, exe, cmdline) is shown on a
//! terminal and written one record per line, so control characters in it are
//! made visible instead of being passed through.

use std::fmt::Write;

/// Lossy UTF-8 with C0/DEL/C1 control characters written as `\n`, `\t`, `\r`
/// or `\xNN`. A process can put anything in its argv or name (a `bash -c`
/// script holds newlines); passed through, it would split CSV and text rows
/// and move the terminal's cursor. Backslashes are kept as they are, as `ps`
/// does, so ordinary paths and regexes read unchanged.
pub fn printable(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    if !text.chars().any(char::is_control) {
        return text.into_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_become_visible_escapes() {
        assert_eq!(printable(b"postgres -D /var/lib"), "postgres -D /var/lib");
        assert_eq!(printable(b"bash -c x=0\n\tloop\r"), "bash -c x=0\\n\\tloop\\r");
        assert_eq!(printable(b"a\x1b[2Jb\x7f"), "a\\x1b[2Jb\\x7f");
        assert_eq!(printable(b"grep a\\.b"), "grep a\\.b", "backslashes kept");
        assert_eq!(
            printable("caf\u{e9} \u{85}".as_bytes()),
            "caf\u{e9} \\x85",
            "C1 too"
        );
        assert_eq!(printable(b"bad \xff utf8"), "bad \u{fffd} utf8");
    }
}
