package tui

import (
	"strings"

	tea "charm.land/bubbletea/v2"
)

// filterLine is the text a user types to narrow a list (`/`): a line of
// its own rather than bubbles' textinput, whose Unicode width tables
// alone weigh 2 MB in a gateway's binary.
type filterLine struct {
	text   []rune
	typing bool // it is being typed: keys go to it
}

// key takes a key pressed while the filter is typed: enter keeps the
// filter, esc clears it, backspace deletes a character, any other text
// is added.
func (f *filterLine) key(msg tea.KeyPressMsg) {
	switch msg.String() {
	case "enter":
		f.typing = false
	case "esc":
		f.typing, f.text = false, nil
	case "backspace":
		if len(f.text) > 0 {
			f.text = f.text[:len(f.text)-1]
		}
	default:
		if msg.Text != "" {
			f.text = append(f.text, []rune(msg.Text)...)
		}
	}
}

// lower is the filter in lower case, "" for none.
func (f *filterLine) lower() string { return strings.ToLower(string(f.text)) }

// prompt is the footer while the filter is typed.
func (f *filterLine) prompt() string {
	return "filter: " + string(f.text) + "█" + dimStyle.Render("  (enter keeps it, esc clears it)")
}

// kept is what the footer says of a filter kept, "" for none.
func (f *filterLine) kept() string {
	if len(f.text) == 0 {
		return ""
	}
	return warnStyle.Render("filter "+string(f.text)) + " (esc clears) · "
}
