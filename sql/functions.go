package sql

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"text/template"

	"github.com/pgdcb/pgdcb/internal/migrate"
)

//go:embed functions/*.sql
var functionFiles embed.FS

// functions returns the schema's server functions (append_events,
// append_group, retention, the rebase, the append-only trigger's), one per
// file of sql/functions, rendered from their templates with the {{schema}}
// placeholder left in, in name order. Migrate applies them after the
// numbered steps, again whenever a function's text (its Checksum) differs
// from the one recorded in the schema's schema_functions table.
func functions() []migrate.Function { return renderedFunctions() }

var renderedFunctions = sync.OnceValue(func() []migrate.Function {
	fns, err := renderFunctions(functionFiles, "functions")
	if err != nil {
		panic(err) // embedded at build time; TestFunctionsRender names the file
	}
	return fns
})

// renderFunctions renders every NAME.sql of dir in fsys with Go's
// text/template: files whose name starts with "_" only define the templates
// the others share (the append functions' checks, written once), which a
// function includes with {{include "name" data | indent N}}; {{schema}}
// stays a placeholder, filled in per schema when the function is applied;
// {{args "k" "v" …}} builds a template's data.
func renderFunctions(fsys fs.FS, dir string) ([]migrate.Function, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	root := template.New("").Option("missingkey=error")
	root.Funcs(template.FuncMap{
		"schema": func() string { return migrate.Placeholder },
		"args": func(kv ...string) (map[string]string, error) {
			if len(kv)%2 != 0 {
				return nil, fmt.Errorf("args: odd number of arguments")
			}
			m := map[string]string{}
			for i := 0; i < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return m, nil
		},
		"include": func(name string, data any) (string, error) {
			var b strings.Builder
			if err := root.ExecuteTemplate(&b, name, data); err != nil {
				return "", err
			}
			return strings.Trim(b.String(), "\n"), nil
		},
		"indent": func(n int, s string) string {
			lines := strings.Split(s, "\n")
			for i, l := range lines {
				if l != "" {
					lines[i] = strings.Repeat(" ", n) + l
				}
			}
			return strings.Join(lines, "\n")
		},
	})
	var names []string
	for _, e := range entries {
		body, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, err
		}
		if _, err := root.New(e.Name()).Parse(string(body)); err != nil {
			return nil, fmt.Errorf("sql/%s/%s: %w", dir, e.Name(), err)
		}
		if !strings.HasPrefix(e.Name(), "_") {
			names = append(names, e.Name())
		}
	}
	var out []migrate.Function
	for _, n := range names {
		var b strings.Builder
		if err := root.ExecuteTemplate(&b, n, nil); err != nil {
			return nil, fmt.Errorf("sql/%s/%s: %w", dir, n, err)
		}
		out = append(out, migrate.Function{Name: strings.TrimSuffix(n, ".sql"), SQL: strings.TrimLeft(b.String(), "\n")})
	}
	return out, nil
}
