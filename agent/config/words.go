package config

import (
	"slices"
	"strings"
)

// foldWords writes each field that takes one of a few words in the case
// its list gives it, whatever case the file wrote it in: `JSON` is
// `json`, `Tumbling` is `tumbling`. A value that is none of the words
// stays as written, for the validator to refuse and show.
func (c *Config) foldWords() {
	foldWord(&c.Agent.LogFormat, logFormats)
	for _, s := range c.Sources {
		foldWord(&s.Format, sourceFormats)
	}
	kinds := OperatorKinds()
	for _, o := range c.Operators {
		foldWord(&o.Type, kinds)
		foldWord(&o.OnError, onErrors)
		if o.Window != nil {
			foldWord(&o.Window.Time, windowTimes)
			names := make([]string, len(windowKinds))
			for i, k := range windowKinds {
				names[i] = k.name
			}
			foldWord(&o.Window.Kind, names)
		}
	}
	for _, s := range c.Sinks {
		if s.Output != nil {
			foldWord(&s.Output.Time, outputTimes)
		}
	}
}

// foldWord sets *s to the word of words it is, in any case; it leaves
// *s as it is when it is none of them.
func foldWord(s *string, words []string) {
	if i := slices.IndexFunc(words, func(w string) bool { return strings.EqualFold(w, *s) }); i >= 0 {
		*s = words[i]
	}
}
