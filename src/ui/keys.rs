//! The one key table: the handler, the footer and the help overlay all read it,
//! so what the screen says a key does is what it does.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    Drill,
    Pop,
    GroupBy,
    Search,
    Filter,
    SortLeft,
    SortRight,
    SortInvert,
    Pause,
    Back,
    Forward,
    Widen,
    Narrow,
    ToggleAll,
    Export,
    Help,
    Quit,
    CloseHelp,
    PickToggle,
    PickEarlier,
    PickLater,
    PickApply,
    PickCancel,
    PromptSubmit,
    PromptCancel,
    PromptErase,
    Stacks,
    Folded,
    Expand,
    Collapse,
    StackBack,
    StackClose,
}

/// What the keys act on; overlays take the keyboard from the view below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Main,
    Thread,
    Help,
    Picker,
    Prompt,
    /// The call tree of the selection (`s`).
    Stack,
}

impl Mode {
    const fn bit(self) -> u8 {
        match self {
            Mode::Main => 1,
            Mode::Thread => 2,
            Mode::Help => 4,
            Mode::Picker => 8,
            Mode::Prompt => 16,
            Mode::Stack => 32,
        }
    }
}

const MAIN: u8 = 1;
const THREAD: u8 = 2;
const HELP: u8 = 4;
const PICKER: u8 = 8;
const PROMPT: u8 = 16;
const STACK: u8 = 32;
const BROWSE: u8 = MAIN | THREAD;
/// Keys that move the window or the cursor work in every view.
const VIEWS: u8 = BROWSE | STACK;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Code(KeyCode),
    Char(char),
    Ctrl(char),
}

impl Key {
    fn matches(self, ev: &KeyEvent) -> bool {
        let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
        match self {
            Key::Code(c) => ev.code == c && !ctrl,
            // Shift is part of the character ('I', '<', '?'), so it is not checked.
            Key::Char(c) => ev.code == KeyCode::Char(c) && !ctrl,
            Key::Ctrl(c) => ev.code == KeyCode::Char(c) && ctrl,
        }
    }
}

pub struct Binding {
    pub keys: &'static [Key],
    /// How the keys are written in the footer and help.
    pub label: &'static str,
    /// Short footer text; None keeps the binding out of the footer.
    pub footer: Option<&'static str>,
    pub help: &'static str,
    pub action: Action,
    modes: u8,
    /// Only meaningful with a live sampler (hidden and inert in replay).
    live_only: bool,
}

impl Binding {
    pub fn applies(&self, mode: Mode, live: bool) -> bool {
        self.modes & mode.bit() != 0 && (live || !self.live_only)
    }
}

const fn b(
    keys: &'static [Key],
    label: &'static str,
    footer: Option<&'static str>,
    help: &'static str,
    action: Action,
    modes: u8,
    live_only: bool,
) -> Binding {
    Binding {
        keys,
        label,
        footer,
        help,
        action,
        modes,
        live_only,
    }
}

use Key::{Char, Code, Ctrl};

pub static BINDINGS: &[Binding] = &[
    b(&[Code(KeyCode::Up), Char('k')], "↑/k", Some("move"), "Move the selection up", Action::Up, VIEWS | PICKER | HELP, false),
    b(&[Code(KeyCode::Down), Char('j')], "↓/j", None, "Move the selection down", Action::Down, VIEWS | PICKER | HELP, false),
    b(&[Code(KeyCode::PageUp)], "PgUp", None, "Move up one page", Action::PageUp, VIEWS | PICKER | HELP, false),
    b(&[Code(KeyCode::PageDown)], "PgDn", None, "Move down one page", Action::PageDown, VIEWS | PICKER | HELP, false),
    b(&[Code(KeyCode::Home)], "Home", None, "Go to the first row", Action::Home, VIEWS | PICKER | HELP, false),
    b(&[Code(KeyCode::End)], "End", None, "Go to the last row", Action::End, VIEWS | PICKER | HELP, false),
    b(
        &[Code(KeyCode::Enter)],
        "Enter",
        Some("drill"),
        "Drill into the selected row: its values become filters, then regroup (a single thread opens the thread view)",
        Action::Drill,
        MAIN,
        false,
    ),
    b(
        &[Code(KeyCode::Backspace), Code(KeyCode::Esc)],
        "Bksp/Esc",
        Some("back"),
        "Go back one drill-down level",
        Action::Pop,
        BROWSE,
        false,
    ),
    b(
        &[Code(KeyCode::Enter), Code(KeyCode::Right), Char('l')],
        "Enter/→",
        Some("open"),
        "Open the frame and its chain until it branches; on an open frame, step in",
        Action::Expand,
        STACK,
        false,
    ),
    b(
        &[Code(KeyCode::Left), Char('h')],
        "←",
        Some("close"),
        "Close the frame, or go to its parent",
        Action::Collapse,
        STACK,
        false,
    ),
    b(
        &[Code(KeyCode::Backspace)],
        "Bksp",
        None,
        "Like ←; on a closed outermost frame, back to the view before",
        Action::StackBack,
        STACK,
        false,
    ),
    b(&[Code(KeyCode::Esc)], "Esc", Some("back"), "Back to the view the stacks were opened from", Action::StackClose, STACK, false),
    b(
        &[Char('f')],
        "f",
        Some("folded"),
        "Write the stacks shown as folded lines (root;...;leaf count) to the export dir",
        Action::Folded,
        STACK,
        false,
    ),
    b(&[Char('g')], "g", Some("group"), "Pick the group-by dimensions", Action::GroupBy, MAIN, false),
    b(&[Char('/')], "/", Some("search"), "Show only rows containing a text (empty clears)", Action::Search, MAIN, false),
    b(&[Char('\\')], "\\", Some("filter"), "Filter samples: DIM=VALUE, DIM!=VALUE or DIM~TEXT", Action::Filter, BROWSE, false),
    b(&[Char('<')], "<", Some("sort"), "Sort by the column to the left", Action::SortLeft, MAIN, false),
    b(&[Char('>')], ">", None, "Sort by the column to the right", Action::SortRight, MAIN, false),
    b(&[Char('I')], "I", None, "Invert the sort order", Action::SortInvert, MAIN, false),
    b(&[Char(' ')], "Space", Some("pause"), "Pause/resume the screen (sampling continues)", Action::Pause, VIEWS, true),
    b(&[Char('[')], "[", Some("earlier"), "Move the window back in time", Action::Back, VIEWS, false),
    b(&[Char(']')], "]", Some("later"), "Move the window forward in time", Action::Forward, VIEWS, false),
    b(&[Char('+'), Char('=')], "+", Some("widen"), "Widen the window", Action::Widen, VIEWS, false),
    b(&[Char('-')], "-", Some("narrow"), "Narrow the window", Action::Narrow, VIEWS, false),
    b(&[Char('a')], "a", Some("all"), "Sample all threads / only active ones", Action::ToggleAll, VIEWS, true),
    b(&[Char('e')], "e", Some("export"), "Export the window (samples and table) to files", Action::Export, BROWSE, false),
    b(&[Char('?'), Code(KeyCode::F(1))], "?/F1", Some("help"), "Show this help", Action::Help, VIEWS, false),
    b(&[Char('q'), Code(KeyCode::F(10))], "q/F10", Some("quit"), "Quit", Action::Quit, VIEWS | HELP | PICKER, false),
    b(&[Ctrl('c')], "Ctrl-C", None, "Quit, from anywhere", Action::Quit, VIEWS | HELP | PICKER | PROMPT, false),
    b(
        &[Char('s')],
        "s",
        Some("stacks"),
        "Stack view: call tree of the selection (highlighted row's group; see the end)",
        Action::Stacks,
        BROWSE,
        false,
    ),
    b(
        &[Char('f')],
        "f",
        Some("folded"),
        "Write the selection's stacks as folded lines to the export dir",
        Action::Folded,
        BROWSE,
        false,
    ),
    b(
        &[Code(KeyCode::Esc), Code(KeyCode::Enter), Char('?'), Code(KeyCode::F(1))],
        "Esc/?",
        Some("close"),
        "Close the help",
        Action::CloseHelp,
        HELP,
        false,
    ),
    b(&[Char(' ')], "Space", Some("add/remove"), "Add or remove the dimension under the cursor", Action::PickToggle, PICKER, false),
    b(&[Char('<')], "<", Some("earlier"), "Move the chosen dimension earlier", Action::PickEarlier, PICKER, false),
    b(&[Char('>')], ">", Some("later"), "Move the chosen dimension later", Action::PickLater, PICKER, false),
    b(&[Code(KeyCode::Enter)], "Enter", Some("apply"), "Regroup by the chosen dimensions", Action::PickApply, PICKER, false),
    b(&[Code(KeyCode::Esc)], "Esc", Some("cancel"), "Close without changing the grouping", Action::PickCancel, PICKER, false),
    b(&[Code(KeyCode::Enter)], "Enter", Some("apply"), "Apply the text", Action::PromptSubmit, PROMPT, false),
    b(&[Code(KeyCode::Esc)], "Esc", Some("cancel"), "Cancel", Action::PromptCancel, PROMPT, false),
    b(&[Code(KeyCode::Backspace)], "Bksp", None, "Erase a character", Action::PromptErase, PROMPT, false),
];

/// The action bound to a key press in `mode`, if any.
pub fn action_for(ev: &KeyEvent, mode: Mode, live: bool) -> Option<Action> {
    if ev.kind == KeyEventKind::Release {
        return None;
    }
    BINDINGS
        .iter()
        .find(|b| b.applies(mode, live) && b.keys.iter().any(|k| k.matches(ev)))
        .map(|b| b.action)
}

/// `(keys, what)` pairs for the footer in `mode`.
pub fn footer(mode: Mode, live: bool) -> Vec<(&'static str, &'static str)> {
    BINDINGS
        .iter()
        .filter(|b| b.applies(mode, live))
        .filter_map(|b| b.footer.map(|f| (b.label, f)))
        .collect()
}

/// Every binding for the help overlay, each once, under the first mode it works in.
pub fn help_sections(live: bool) -> Vec<(&'static str, Vec<&'static Binding>)> {
    let mut listed: Vec<*const Binding> = Vec::new();
    let mut out = Vec::new();
    for (title, mode) in [
        ("Main view", Mode::Main),
        ("Thread view", Mode::Thread),
        ("Stack view (s)", Mode::Stack),
        ("Group-by picker (g)", Mode::Picker),
        ("Text prompts (/ and \\)", Mode::Prompt),
        ("Help", Mode::Help),
    ] {
        let list: Vec<&'static Binding> = BINDINGS
            .iter()
            .filter(|b| b.applies(mode, live) && !listed.contains(&(*b as *const Binding)))
            .collect();
        listed.extend(list.iter().map(|b| *b as *const Binding));
        if !list.is_empty() {
            out.push((title, list));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn keys_resolve_per_mode() {
        assert_eq!(
            action_for(&key(KeyCode::Enter), Mode::Main, true),
            Some(Action::Drill)
        );
        assert_eq!(
            action_for(&key(KeyCode::Enter), Mode::Picker, true),
            Some(Action::PickApply)
        );
        assert_eq!(action_for(&key(KeyCode::Enter), Mode::Thread, true), None);
        assert_eq!(
            action_for(&key(KeyCode::Char('q')), Mode::Prompt, true),
            None,
            "q is text in prompts"
        );
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(action_for(&ctrl_c, Mode::Prompt, true), Some(Action::Quit));
        assert_eq!(action_for(&key(KeyCode::Char('c')), Mode::Main, true), None);
        let shift_i = KeyEvent::new(KeyCode::Char('I'), KeyModifiers::SHIFT);
        assert_eq!(action_for(&shift_i, Mode::Main, true), Some(Action::SortInvert));
        assert_eq!(
            action_for(&key(KeyCode::Char('a')), Mode::Main, false),
            None,
            "no sampler in replay"
        );
        assert_eq!(
            action_for(&key(KeyCode::Char('s')), Mode::Thread, true),
            Some(Action::Stacks)
        );
        assert_eq!(
            action_for(&key(KeyCode::Enter), Mode::Stack, true),
            Some(Action::Expand)
        );
        assert_eq!(
            action_for(&key(KeyCode::Right), Mode::Stack, true),
            Some(Action::Expand)
        );
        assert_eq!(
            action_for(&key(KeyCode::Left), Mode::Stack, true),
            Some(Action::Collapse)
        );
        assert_eq!(
            action_for(&key(KeyCode::Backspace), Mode::Stack, true),
            Some(Action::StackBack)
        );
        assert_eq!(
            action_for(&key(KeyCode::Esc), Mode::Stack, true),
            Some(Action::StackClose)
        );
        assert_eq!(
            action_for(&key(KeyCode::Char('f')), Mode::Stack, true),
            Some(Action::Folded)
        );
        assert_eq!(action_for(&key(KeyCode::Char('g')), Mode::Stack, true), None);
    }

    #[test]
    fn no_key_is_bound_twice_in_a_mode() {
        for mode in [
            Mode::Main,
            Mode::Thread,
            Mode::Help,
            Mode::Picker,
            Mode::Prompt,
            Mode::Stack,
        ] {
            let mut seen = Vec::new();
            for b in BINDINGS.iter().filter(|b| b.applies(mode, true)) {
                for k in b.keys {
                    assert!(!seen.contains(k), "{k:?} bound twice in {mode:?}");
                    seen.push(*k);
                }
            }
        }
    }

    #[test]
    fn footer_and_help_come_from_the_table() {
        let f = footer(Mode::Main, false);
        assert!(f.contains(&("Enter", "drill")));
        assert!(!f.iter().any(|(_, w)| *w == "pause"), "pause is live-only");
        let f = footer(Mode::Stack, true);
        assert_eq!(
            f[..4],
            [
                ("↑/k", "move"),
                ("Enter/→", "open"),
                ("←", "close"),
                ("Esc", "back")
            ]
        );
        let help = help_sections(true);
        let listed: usize = help.iter().map(|(_, l)| l.len()).sum();
        assert_eq!(listed, BINDINGS.len(), "help lists every binding once");
    }
}
