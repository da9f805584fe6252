//! UI state and what each key does to it. Pure: no terminal, no clock except
//! for toasts, so every behaviour is testable with fixture snapshots.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::dimensions::{self, Dimension, DIMENSIONS};
use crate::filter::Filter;
use crate::model::{Session, Snapshot, State, ThreadSample};
use crate::value::Value;

use super::export;
use super::history::History;
use super::keys::{self, Action, Mode};
use super::stack_tree::StackTree;
use super::stacks::{Selection, StackCounts, StackView};
use super::timeline::{covers, Columns};
use super::view::{Cache, Query, Window, WindowView};

/// How the UI is set up; the CLI fills it.
#[derive(Clone, Debug)]
pub struct UiOptions {
    /// History kept for `[`/`]` (live only; a replay keeps the whole recording).
    pub history: Duration,
    /// Where `e` writes its files.
    pub export_dir: PathBuf,
    pub group_by: Vec<&'static Dimension>,
    pub filters: Vec<Filter>,
    /// Shown as an error toast at start (e.g. hooks that could not attach).
    pub warnings: Vec<String>,
}

impl Default for UiOptions {
    fn default() -> Self {
        UiOptions {
            history: Duration::from_secs(3600),
            export_dir: PathBuf::from("."),
            group_by: dimensions::parse_list(dimensions::DEFAULT_GROUP_BY)
                .expect("default group-by is valid"),
            filters: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// Window widths `+`/`-` step through, in seconds.
pub const SPANS: &[u64] = &[
    10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400,
];
pub const DEFAULT_SPAN: Duration = Duration::from_secs(60);
/// Drill-down regroups by the first of these not yet pinned by a filter,
/// ending at single threads.
const DRILL_ORDER: &[&str] = &["state", "syscall", "comm", "kstack_top", "tid"];
const TOAST_FOR: Duration = Duration::from_secs(5);

/// Column the table is sorted by: 0 is avg_threads, `i + 1` is group-by dimension `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    pub col: usize,
    pub reverse: bool,
}

/// One drill-down level: what is grouped and filtered, and where the cursor is.
#[derive(Clone, Debug, PartialEq)]
pub struct Level {
    pub query: Query,
    pub selected: usize,
    pub offset: usize,
    pub sort: Sort,
    /// Rows shown only if one of their values contains this (case-insensitive).
    pub search: String,
    /// Group under the cursor: the cursor follows it when rows reorder as
    /// data arrives or the sort changes, so Enter drills into what was selected.
    pub selected_key: Option<Vec<Value>>,
}

impl Level {
    fn new(query: Query) -> Level {
        Level {
            query,
            selected: 0,
            offset: 0,
            sort: Sort {
                col: 0,
                reverse: false,
            },
            search: String::new(),
            selected_key: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Picker {
    /// Index into the registry.
    pub cursor: usize,
    pub offset: usize,
    pub chosen: Vec<&'static Dimension>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptKind {
    Search,
    Filter,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Prompt {
    pub kind: PromptKind,
    pub text: String,
    pub error: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Overlay {
    None,
    /// Help, scrolled down by this many lines.
    Help(usize),
    Picker(Picker),
    Prompt(Prompt),
}

#[derive(Clone, Debug)]
pub struct Toast {
    pub text: String,
    pub error: bool,
    pub at: Instant,
}

/// What the event loop must do outside the UI state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    None,
    Quit,
    /// Tell the live sampler to report all threads (true) or active ones only.
    SetAll(bool),
}

/// One column of the thread view's timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// No snapshot stands for this time (a gap, or before the first).
    NoData,
    /// Snapshots stand for it, but the thread was not in them (inactive, or absent).
    NotSampled,
    /// The state the thread spent most of the column in.
    In(State),
}

/// The thread view's data: every sample of one thread in the window.
#[derive(Clone, Debug, Default)]
pub struct ThreadData {
    pub tid: u32,
    /// Newest first: (snapshot time, sample).
    pub samples: Vec<(u64, ThreadSample)>,
    /// Per timeline column (the chart's columns): what the thread did there.
    pub timeline: Vec<Slot>,
    key: Option<(u32, Window, u64, usize)>,
}

pub struct App {
    pub session: Session,
    pub history: History,
    pub live: bool,
    /// The live source closed (sampler stopped); history stays browsable.
    pub source_ended: bool,
    pub all: bool,
    pub level: Level,
    pub stack: Vec<Level>,
    pub overlay: Overlay,
    /// Right edge of the window; None follows the newest snapshot.
    pub end: Option<u64>,
    pub span: Duration,
    pub toast: Option<Toast>,
    pub export_dir: PathBuf,
    /// Replay snapshots still to load: (loaded, total).
    pub loading: Option<(usize, usize)>,
    /// Geometry from the last `prepare`: chart columns (one cell each, equal
    /// spans of the window) and table rows per page.
    pub chart_cols: usize,
    pub page: usize,
    cache: Cache,
    rows: Vec<usize>,
    rows_key: Option<(u64, Sort, String)>,
    pub thread: ThreadData,
    /// The stack view, open over the main or thread view.
    pub stacks: Option<StackView>,
}

impl App {
    pub fn new(session: Session, opts: &UiOptions, live: bool, all: bool) -> App {
        let history = History::new(live.then_some(opts.history));
        App {
            session,
            history,
            live,
            source_ended: false,
            all,
            level: Level::new(Query {
                dims: opts.group_by.clone(),
                filters: opts.filters.clone(),
            }),
            stack: Vec::new(),
            overlay: Overlay::None,
            end: None,
            span: DEFAULT_SPAN,
            toast: None,
            export_dir: opts.export_dir.clone(),
            loading: None,
            chart_cols: 0,
            page: 10,
            cache: Cache::default(),
            rows: Vec::new(),
            rows_key: None,
            thread: ThreadData::default(),
            stacks: None,
        }
    }

    pub fn push(&mut self, snap: Snapshot) {
        self.history.push(snap);
    }

    /// Prepares to load a recording: a window wide enough to show all of it,
    /// and a "loading" indicator until the event loop has pushed it all.
    pub fn start_replay(&mut self, snaps: &[Snapshot]) {
        if let (Some(a), Some(b)) = (snaps.first(), snaps.last()) {
            // A window ending at the last snapshot takes the first one in when
            // it is longer than the time between them.
            let secs = b.time_ns.saturating_sub(a.time_ns) / 1_000_000_000 + 1;
            self.span = App::span_covering(secs);
            self.loading = Some((0, snaps.len()));
        }
    }

    /// Widest step of the `+`/`-` ladder needed to show `secs` at once.
    pub fn span_covering(secs: u64) -> Duration {
        Duration::from_secs(
            SPANS
                .iter()
                .copied()
                .find(|&s| s >= secs)
                .unwrap_or(SPANS[SPANS.len() - 1]),
        )
    }

    pub fn mode(&self) -> Mode {
        match self.overlay {
            Overlay::Help(_) => Mode::Help,
            Overlay::Picker(_) => Mode::Picker,
            Overlay::Prompt(_) => Mode::Prompt,
            Overlay::None if self.stacks.is_some() => Mode::Stack,
            Overlay::None if self.pinned_tid().is_some() => Mode::Thread,
            Overlay::None => Mode::Main,
        }
    }

    /// The thread the filters pin down to (thread view), if any.
    pub fn pinned_tid(&self) -> Option<u32> {
        self.level
            .query
            .filters
            .iter()
            .filter(|f| f.dim.name == "tid")
            .find_map(Filter::pinned_number)
            .and_then(|t| u32::try_from(t).ok())
    }

    pub fn paused(&self) -> bool {
        self.live && self.end.is_some()
    }

    /// The window on history: `span` back from the chosen end, which is moved
    /// back to a snapshot's time so the window's newest stretch of time is
    /// one a snapshot in it stands for (not a false gap before the next one).
    pub fn window(&self) -> Option<Window> {
        let latest = self.history.latest()?.time_ns;
        let chosen = self.end.unwrap_or(latest).min(latest);
        let end_ns = match self.history.index_after(chosen) {
            0 => chosen,
            i => self.history.meta(i - 1).time_ns,
        };
        let start_ns = end_ns.saturating_sub(self.span.as_nanos() as u64);
        let (lo, hi) = (
            self.history.index_after(start_ns),
            self.history.index_after(end_ns),
        );
        Some(Window {
            lo,
            hi,
            start_ns,
            end_ns,
        })
    }

    pub fn view(&self) -> &WindowView {
        self.cache.view()
    }

    /// Table rows after search and sort: indices into `view().agg.groups`.
    pub fn rows(&self) -> &[usize] {
        &self.rows
    }

    /// Whether grouping is still catching up with the window (redraw soon).
    pub fn pending(&self) -> bool {
        if let Some(sv) = &self.stacks {
            // The main view is not refreshed under the stack view: only its work counts.
            return sv.pending() || self.loading.is_some();
        }
        self.cache.pending() || self.loading.is_some()
    }

    /// Brings derived data up to date for a screen with `chart_cols` chart
    /// columns and `page` table rows, grouping for at most `budget`.
    pub fn prepare(&mut self, chart_cols: usize, page: usize, budget: Option<Duration>) {
        self.chart_cols = chart_cols;
        self.page = page.max(1);
        if self.toast.as_ref().is_some_and(|t| t.at.elapsed() > TOAST_FOR) {
            self.toast = None;
        }
        let Some(win) = self.window() else { return };
        if let Some(sv) = &mut self.stacks {
            sv.refresh(&self.history, win, budget, self.page);
            return;
        }
        if let Some(tid) = self.pinned_tid() {
            self.refresh_thread(tid, win);
        } else {
            self.cache
                .refresh(&self.history, &self.level.query, win, chart_cols, budget);
            self.refresh_rows();
        }
        let len = self.row_count();
        let lvl = &mut self.level;
        lvl.selected = lvl.selected.min(len.saturating_sub(1));
        if lvl.selected < lvl.offset {
            lvl.offset = lvl.selected;
        } else if lvl.selected >= lvl.offset + self.page {
            lvl.offset = lvl.selected + 1 - self.page;
        }
        if let Overlay::Picker(p) = &mut self.overlay {
            if p.cursor < p.offset {
                p.offset = p.cursor;
            } else if p.cursor >= p.offset + self.page {
                p.offset = p.cursor + 1 - self.page;
            }
        }
    }

    fn refresh_rows(&mut self) {
        let key = (self.cache.generation, self.level.sort, self.level.search.clone());
        if self.rows_key.as_ref() == Some(&key) {
            return;
        }
        let groups = &self.cache.view().agg.groups;
        let needle = self.level.search.to_lowercase();
        let mut rows: Vec<usize> = (0..groups.len())
            .filter(|&i| {
                needle.is_empty()
                    || groups[i]
                        .key
                        .iter()
                        .any(|v| v.to_string().to_lowercase().contains(&needle))
            })
            .collect();
        let Sort { col, reverse } = self.level.sort;
        if col > 0 {
            // Groups come heaviest first; a stable sort keeps that as the tie-break.
            rows.sort_by(|&a, &b| groups[a].key[col - 1].cmp(&groups[b].key[col - 1]));
        }
        if reverse {
            rows.reverse();
        }
        if let Some(k) = &self.level.selected_key {
            if let Some(pos) = rows.iter().position(|&i| groups[i].key == *k) {
                self.level.selected = pos;
            }
        }
        self.rows = rows;
        self.rows_key = Some(key);
        self.remember_selection();
    }

    fn remember_selection(&mut self) {
        let groups = &self.cache.view().agg.groups;
        if let Some(&i) = self.rows.get(self.level.selected) {
            self.level.selected_key = Some(groups[i].key.clone());
        }
    }

    fn refresh_thread(&mut self, tid: u32, win: Window) {
        let key = Some((tid, win, self.history.first_id(), self.chart_cols));
        if self.thread.key == key {
            return;
        }
        let h = &self.history;
        let columns = Columns::new(win.start_ns, win.end_ns, self.chart_cols.max(1));
        let mut covered = vec![false; columns.count()];
        let mut weights = vec![[0u64; State::ALL.len()]; columns.count()];
        let mut samples = Vec::new();
        for i in (win.lo..win.hi).rev() {
            let (from, to) = covers(h, i);
            let sample = h.find_tid(i, tid).map(|r| h.sample(i, r));
            columns.spread(from, to, |c, ns| {
                covered[c] = true;
                if let Some(s) = &sample {
                    weights[c][s.state as usize] += ns;
                }
            });
            if let Some(s) = sample {
                samples.push((h.meta(i).time_ns, s));
            }
        }
        let timeline = weights
            .iter()
            .zip(covered)
            .map(|(w, covered)| {
                let best = (0..w.len()).max_by_key(|&i| (w[i], std::cmp::Reverse(i)));
                match best {
                    Some(b) if w[b] > 0 => Slot::In(State::ALL[b]),
                    _ if covered => Slot::NotSampled,
                    _ => Slot::NoData,
                }
            })
            .collect();
        self.thread = ThreadData {
            tid,
            samples,
            timeline,
            key,
        };
    }

    fn row_count(&self) -> usize {
        match self.mode() {
            Mode::Thread => self.thread.samples.len(),
            Mode::Picker => DIMENSIONS.len(),
            _ if self.pinned_tid().is_some() => self.thread.samples.len(),
            _ => self.rows.len(),
        }
    }

    /// Resolves a key press through the key table and applies it.
    pub fn handle_key(&mut self, ev: &KeyEvent) -> Effect {
        let mode = self.mode();
        match keys::action_for(ev, mode, self.live) {
            Some(a) => self.apply(a),
            None => {
                if let (Overlay::Prompt(p), KeyCode::Char(c)) = (&mut self.overlay, ev.code) {
                    if !ev.modifiers.contains(KeyModifiers::CONTROL) {
                        p.text.push(c);
                        p.error = None;
                    }
                }
                Effect::None
            }
        }
    }

    pub fn apply(&mut self, action: Action) -> Effect {
        match action {
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            Action::PageUp => self.move_by(-(self.page as isize)),
            Action::PageDown => self.move_by(self.page as isize),
            Action::Home => self.move_by(isize::MIN / 2),
            Action::End => self.move_by(isize::MAX / 2),
            Action::Drill => self.drill(),
            Action::Pop => self.pop(),
            Action::GroupBy => {
                self.overlay = Overlay::Picker(Picker {
                    cursor: 0,
                    offset: 0,
                    chosen: self.level.query.dims.clone(),
                })
            }
            Action::Search => {
                let text = self.level.search.clone();
                self.overlay = Overlay::Prompt(Prompt {
                    kind: PromptKind::Search,
                    text,
                    error: None,
                })
            }
            Action::Filter => {
                self.overlay = Overlay::Prompt(Prompt {
                    kind: PromptKind::Filter,
                    text: String::new(),
                    error: None,
                })
            }
            Action::SortLeft | Action::SortRight => {
                let n = self.level.query.dims.len() + 1;
                let step = if action == Action::SortLeft { n - 1 } else { 1 };
                self.level.sort = Sort {
                    col: (self.level.sort.col + step) % n,
                    reverse: false,
                };
            }
            Action::SortInvert => self.level.sort.reverse = !self.level.sort.reverse,
            Action::Pause => {
                self.end = if self.end.is_some() {
                    None
                } else {
                    self.history.latest().map(|s| s.time_ns)
                }
            }
            Action::Back | Action::Forward => self.shift(action == Action::Back),
            Action::Widen | Action::Narrow => {
                let cur = self.span.as_secs();
                let next = if action == Action::Widen {
                    SPANS.iter().copied().find(|&s| s > cur)
                } else {
                    SPANS.iter().rev().copied().find(|&s| s < cur)
                };
                if let Some(s) = next {
                    self.span = Duration::from_secs(s);
                }
            }
            Action::ToggleAll => {
                self.all = !self.all;
                let what = if self.all {
                    "all threads"
                } else {
                    "active threads only"
                };
                self.say(format!("sampling {what}"), false);
                return Effect::SetAll(self.all);
            }
            Action::Export => self.export(),
            Action::Help => self.overlay = Overlay::Help(0),
            Action::CloseHelp | Action::PickCancel | Action::PromptCancel => self.overlay = Overlay::None,
            Action::Quit => return Effect::Quit,
            Action::PickToggle | Action::PickEarlier | Action::PickLater => self.pick(action),
            Action::PickApply => self.pick_apply(),
            Action::PromptSubmit => self.prompt_submit(),
            Action::Stacks => {
                self.stacks = Some(StackView::new(self.selection()));
            }
            Action::Folded => self.write_folded(),
            Action::Expand => {
                if let Some(sv) = &mut self.stacks {
                    sv.expand();
                }
            }
            Action::Collapse | Action::StackBack => {
                let back = self.stacks.as_mut().is_some_and(|sv| !sv.collapse());
                if back && action == Action::StackBack {
                    self.stacks = None;
                }
            }
            Action::StackClose => self.stacks = None,
            Action::PromptErase => {
                if let Overlay::Prompt(p) = &mut self.overlay {
                    p.text.pop();
                    p.error = None;
                }
            }
        }
        Effect::None
    }

    pub fn say(&mut self, text: String, error: bool) {
        self.toast = Some(Toast {
            text,
            error,
            at: Instant::now(),
        });
    }

    fn move_by(&mut self, delta: isize) {
        if let Overlay::Help(scroll) = &mut self.overlay {
            *scroll = (*scroll as isize)
                .saturating_add(delta)
                .clamp(0, keys::BINDINGS.len() as isize) as usize;
            return;
        }
        if let Some(sv) = &mut self.stacks {
            sv.move_by(delta);
            return;
        }
        let len = self.row_count();
        let cur = match &self.overlay {
            Overlay::Picker(p) => p.cursor,
            _ => self.level.selected,
        };
        let next = (cur as isize)
            .saturating_add(delta)
            .clamp(0, len.saturating_sub(1) as isize) as usize;
        match &mut self.overlay {
            Overlay::Picker(p) => p.cursor = next,
            _ => {
                self.level.selected = next;
                if self.pinned_tid().is_none() {
                    self.remember_selection();
                }
            }
        }
    }

    fn push_level(&mut self, level: Level) {
        let prev = std::mem::replace(&mut self.level, level);
        self.stack.push(prev);
    }

    /// The highlighted row's samples as filters: the level's own, and each
    /// group-by value of the row compared by value. What Enter drills into
    /// and what `s` and `f` cover, so the two always take the same samples.
    fn row_filters(&self) -> Option<Vec<Filter>> {
        let g = self
            .rows
            .get(self.level.selected)
            .map(|&i| &self.cache.view().agg.groups[i])?;
        let mut filters = self.level.query.filters.clone();
        for (d, v) in self.level.query.dims.iter().zip(&g.key) {
            let f = Filter::exact(d, v);
            if !filters.contains(&f) {
                filters.push(f);
            }
        }
        Some(filters)
    }

    fn drill(&mut self) {
        let Some(filters) = self.row_filters() else {
            self.say("nothing to drill into".into(), true);
            return;
        };
        let dims = next_dims(&filters);
        self.push_level(Level::new(Query { dims, filters }));
    }

    fn pop(&mut self) {
        if let Some(prev) = self.stack.pop() {
            self.level = prev;
        } else if !self.level.search.is_empty() {
            self.level.search.clear();
        }
    }

    /// Moves the window half its width back or forward; forward past the
    /// newest snapshot follows live data again.
    fn shift(&mut self, back: bool) {
        let (Some(first), Some(latest)) = (
            self.history.first_time(),
            self.history.latest().map(|s| s.time_ns),
        ) else {
            return;
        };
        let cur = self.end.unwrap_or(latest).min(latest);
        let half = self.span.as_nanos() as u64 / 2;
        if back {
            self.end = Some(cur.saturating_sub(half).max(first));
        } else if cur + half >= latest {
            self.end = None;
        } else {
            self.end = Some(cur + half);
        }
    }

    fn pick(&mut self, action: Action) {
        let Overlay::Picker(p) = &mut self.overlay else {
            return;
        };
        let dim = &DIMENSIONS[p.cursor];
        let at = p.chosen.iter().position(|d| *d == dim);
        match (action, at) {
            (Action::PickToggle, Some(i)) => {
                p.chosen.remove(i);
            }
            (Action::PickToggle, None) => p.chosen.push(dim),
            (Action::PickEarlier, Some(i)) if i > 0 => p.chosen.swap(i, i - 1),
            (Action::PickLater, Some(i)) if i + 1 < p.chosen.len() => p.chosen.swap(i, i + 1),
            _ => {}
        }
    }

    fn pick_apply(&mut self) {
        let Overlay::Picker(p) = &self.overlay else {
            return;
        };
        if p.chosen.is_empty() {
            self.say("pick at least one dimension (Space adds)".into(), true);
            return;
        }
        self.level.query.dims = p.chosen.clone();
        self.level.sort = Sort {
            col: 0,
            reverse: false,
        };
        self.level.selected = 0;
        self.overlay = Overlay::None;
    }

    fn prompt_submit(&mut self) {
        let Overlay::Prompt(p) = &mut self.overlay else {
            return;
        };
        match p.kind {
            PromptKind::Search => {
                self.level.search = p.text.trim().to_string();
                self.level.selected = 0;
                self.overlay = Overlay::None;
            }
            PromptKind::Filter => match Filter::parse(p.text.trim()) {
                Ok(f) => {
                    self.overlay = Overlay::None;
                    let mut query = self.level.query.clone();
                    query.filters.push(f);
                    self.push_level(Level::new(query));
                }
                Err(e) => p.error = Some(e),
            },
        }
    }

    fn export(&mut self) {
        let Some(win) = self.window() else {
            self.say("nothing to export yet".into(), true);
            return;
        };
        let res = export::export(
            &self.export_dir,
            &self.session,
            &self.history,
            win,
            &self.level.query,
            None,
        );
        match res {
            Ok(paths) => {
                let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                self.say(format!("exported {}", names.join(", ")), false)
            }
            Err(e) => self.say(format!("export failed: {e:#}"), true),
        }
    }
}

impl App {
    /// What `s` and `f` cover: the level's filters and, in the main view, the
    /// highlighted row's group (all the filtered samples when there is no row).
    pub fn selection(&self) -> Selection {
        let row = if self.pinned_tid().is_some() {
            None
        } else {
            self.row_filters()
        };
        Selection {
            filters: row.unwrap_or_else(|| self.level.query.filters.clone()),
        }
    }

    /// `f`: the selection's stacks over the window as a folded file. Uses the
    /// open stack view's tree when it is complete, so the file is what is shown.
    fn write_folded(&mut self) {
        let Some(win) = self.window() else {
            self.say("nothing to export yet".into(), true);
            return;
        };
        let tree = match &self.stacks {
            Some(sv) if !sv.pending() => sv.tree.clone(),
            _ => {
                let total: usize = (win.lo..win.hi).map(|i| self.history.rows(i)).sum();
                if total > export::MAX_EXPORT_SAMPLES {
                    self.say(
                        format!("window holds {total} samples; narrow it with - or filter first"),
                        true,
                    );
                    return;
                }
                let sel = self
                    .stacks
                    .as_ref()
                    .map_or_else(|| self.selection(), |sv| sv.sel.clone());
                let mut counts = StackCounts::default();
                counts.refresh(&self.history, &sel, win, None);
                counts.tree()
            }
        };
        self.save_folded(&tree);
    }

    fn save_folded(&mut self, tree: &StackTree) {
        if tree.total() == 0 {
            self.say("no samples in the selection: nothing written".into(), true);
            return;
        }
        match export::export_folded(&self.export_dir, &self.session, tree, None) {
            Ok(p) => self.say(
                format!("wrote {} samples to {}", tree.total(), p.display()),
                false,
            ),
            Err(e) => self.say(format!("folded export failed: {e:#}"), true),
        }
    }
}

/// Group-by after drilling: the first dimensions of the drill order that no
/// equality filter pins yet (up to three).
fn next_dims(filters: &[Filter]) -> Vec<&'static Dimension> {
    let pinned = |name: &str| {
        let dim = dimensions::find(name).expect("drill order names registry dimensions");
        filters.iter().any(|f| f.pins(dim))
    };
    let dims: Vec<_> = DRILL_ORDER
        .iter()
        .filter(|n| !pinned(n))
        .take(3)
        .map(|n| dimensions::find(n).expect("drill order names registry dimensions"))
        .collect();
    if dims.is_empty() {
        vec![dimensions::find("timestamp").expect("timestamp is a dimension")]
    } else {
        dims
    }
}
