//! Plain-text result tables for the terminal: a header row, then a row per result; no borders,
//! columns two spaces apart, each as wide as its widest cell (a long tool name such as `ringio-a:copy-range`
//! keeps the columns straight), the first column left-aligned and the others right-aligned.
//! `bench copy`, `bench server` and `dup --compare` print theirs this way. The same tables as
//! Markdown ([`Style::Markdown`]) are what `bench report` writes into the docs.

use comfy_table::{presets, CellAlignment};

/// A result table: comfy-table's grid, and which columns are text (left-aligned), which
/// the Markdown rule needs and the grid does not tell.
#[derive(Debug)]
pub struct Table {
    grid: comfy_table::Table,
    left: Vec<usize>,
}

impl Table {
    /// Adds a row of cells.
    pub fn add_row<T: Into<comfy_table::Row>>(&mut self, row: T) -> &mut Self {
        self.grid.add_row(row);
        self
    }
}

/// An empty table with `header`; add rows with `add_row`, print with [`render`].
pub fn new(header: &[&str]) -> Table {
    let mut grid = comfy_table::Table::new();
    grid.load_preset(presets::NOTHING)
        .set_header(header.to_vec());
    for (i, column) in grid.column_iter_mut().enumerate() {
        column.set_padding((0, 2));
        if i > 0 {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    Table {
        grid,
        left: vec![0],
    }
}

/// Left-aligns column `index` (a text column, such as a verdict).
pub fn align_left(table: &mut Table, index: usize) {
    if let Some(column) = table.grid.column_mut(index) {
        column.set_cell_alignment(CellAlignment::Left);
        table.left.push(index);
    }
}

/// How a table is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Columns two spaces apart, for the terminal.
    Terminal,
    /// A Markdown table: numbers right-aligned (`---:`), `|` in a cell escaped.
    Markdown,
}

/// The table as lines of text, with no trailing spaces, ending in a newline.
pub fn render(table: &Table) -> String {
    let mut text = table.grid.trim_fmt();
    text.push('\n');
    text
}

/// The table drawn in `style`.
pub fn render_as(table: &Table, style: Style) -> String {
    match style {
        Style::Terminal => render(table),
        Style::Markdown => markdown(table),
    }
}

fn markdown(table: &Table) -> String {
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let cells = |row: &comfy_table::Row| -> Vec<String> {
        row.cell_iter()
            .map(|c| c.content().replace('|', "\\|").replace('\n', " "))
            .collect()
    };
    let mut text = String::new();
    if let Some(header) = table.grid.header() {
        text.push_str(&line(cells(header)));
        let rule = (0..header.cell_count())
            .map(|i| {
                if table.left.contains(&i) {
                    "---"
                } else {
                    "---:"
                }
                .to_string()
            })
            .collect();
        text.push_str(&line(rule));
    }
    for row in table.grid.row_iter() {
        text.push_str(&line(cells(row)));
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_fit_their_widest_cell() {
        let mut t = super::new(&["tool", "median s", "verified"]);
        super::align_left(&mut t, 2);
        t.add_row(vec!["cp", "0.123", "ok"]);
        t.add_row(vec!["ringio-a:copy-range", "12.500", "FAILED: x"]);
        assert_eq!(
            super::render(&t),
            "tool                 median s  verified\n\
             cp                      0.123  ok\n\
             ringio-a:copy-range    12.500  FAILED: x\n"
        );
    }

    #[test]
    fn markdown_aligns_numbers_right_and_escapes_bars() {
        let mut t = super::new(&["tool", "median s", "verified"]);
        super::align_left(&mut t, 2);
        t.add_row(vec!["cp", "0.123", "skipped: a | b"]);
        assert_eq!(
            super::render_as(&t, super::Style::Markdown),
            "| tool | median s | verified |\n\
             | --- | ---: | --- |\n\
             | cp | 0.123 | skipped: a \\| b |\n"
        );
    }
}
