//! Plain-text result tables for the terminal: a header row, then a row per result; no borders,
//! columns two spaces apart, each as wide as its widest cell (a long tool name such as `ringio-a:copy-range`
//! keeps the columns straight), the first column left-aligned and the others right-aligned.
//! `bench copy`, `bench server` and `dup --compare` print theirs this way.

use comfy_table::{presets, CellAlignment, Table};

/// An empty table with `header`; add rows with `add_row`, print with [`render`].
pub fn new(header: &[&str]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_header(header.to_vec());
    for (i, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, 2));
        if i > 0 {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// Left-aligns column `index` (a text column, such as a verdict).
pub fn align_left(table: &mut Table, index: usize) {
    if let Some(column) = table.column_mut(index) {
        column.set_cell_alignment(CellAlignment::Left);
    }
}

/// The table as lines of text, with no trailing spaces, ending in a newline.
pub fn render(table: &Table) -> String {
    let mut text = table.trim_fmt();
    text.push('\n');
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
}
