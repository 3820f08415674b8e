package bench

import (
	"fmt"
	"strings"
)

// WriteTable writes rows as a Markdown table, the first row the header,
// columns padded to line up in a terminal.
func WriteTable(b *strings.Builder, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			width[i] = max(width[i], len([]rune(cell)))
		}
	}
	line := func(row []string) {
		b.WriteString("|")
		for i, cell := range row {
			fmt.Fprintf(b, " %s%s |", cell, strings.Repeat(" ", width[i]-len([]rune(cell))))
		}
		b.WriteString("\n")
	}
	line(rows[0])
	sep := make([]string, len(width))
	for i, w := range width {
		sep[i] = strings.Repeat("-", w)
	}
	line(sep)
	for _, row := range rows[1:] {
		line(row)
	}
}

// Wrap breaks text into lines of at most width runes where it can, at
// spaces, starting each line after the first with indent.
func Wrap(text string, width int, indent string) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(text) {
		n := len([]rune(word))
		if i > 0 && line+1+n > width {
			b.WriteString("\n" + indent)
			line = len(indent)
		} else if i > 0 {
			b.WriteString(" ")
			line++
		} else if strings.HasPrefix(text, " ") {
			lead := text[:len(text)-len(strings.TrimLeft(text, " "))]
			b.WriteString(lead)
			line = len(lead)
		}
		b.WriteString(word)
		line += n
	}
	b.WriteString("\n")
	return b.String()
}
