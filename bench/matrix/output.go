package matrix

import (
	"bytes"
	"os"
	"path/filepath"
)

// WriteFiles writes results.csv, results.json and results.md (the
// Markdown of WriteMarkdown) into dir, and the PNG plots when plots is
// set. It returns the paths written.
func WriteFiles(rep *Report, dir string, plots bool) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range []struct {
		name  string
		write func(*bytes.Buffer, *Report) error
	}{
		{"results.csv", func(b *bytes.Buffer, r *Report) error { return WriteCSV(b, r) }},
		{"results.json", func(b *bytes.Buffer, r *Report) error { return WriteJSON(b, r) }},
		{"results.md", func(b *bytes.Buffer, r *Report) error { return WriteMarkdown(b, r) }},
	} {
		var b bytes.Buffer
		if err := f.write(&b, rep); err != nil {
			return paths, err
		}
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	if plots {
		ps, err := WritePlots(rep, dir)
		paths = append(paths, ps...)
		if err != nil {
			return paths, err
		}
	}
	return paths, nil
}
