package pgdcb_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// zeroMeansDefaultRe is how a numeric field's comment says what 0 means
// (docs/CONVENTIONS.md "Config").
var zeroMeansDefaultRe = regexp.MustCompile(`\b0: the defaults?\b`)

// configStruct is one exported …Config struct of a library package.
type configStruct struct {
	pkg, name string
	numeric   bool     // it has an int or duration field
	embeds    []string // the …Config types of its package it embeds
}

// TestConfigsFollowTheConvention checks docs/CONVENTIONS.md "Config" on
// every exported struct named Config or …Config of the library's packages
// (not internal/, cmd/, bench/ or examples/): each field's comment says its
// default (a numeric or duration field: "0: the default, …"; any other:
// "Default …", or "No default" for a required one), and a struct with a
// numeric field has the two methods New calls, validate and then
// withDefaults, on its pointer (or is embedded in a Config of its package
// that has them).
func TestConfigsFollowTheConvention(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	var structs []configStruct
	methods := map[string]bool{} // "pkg.Type.method"
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch {
			case path == ".":
			case strings.HasPrefix(d.Name(), "."), d.Name() == "testdata", d.Name() == "vendor",
				path == "internal", path == "cmd", path == "bench", path == "examples":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		pkg := filepath.Dir(path)
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv != nil && len(decl.Recv.List) == 1 {
					if star, ok := decl.Recv.List[0].Type.(*ast.StarExpr); ok {
						if id, ok := star.X.(*ast.Ident); ok {
							methods[pkg+"."+id.Name+"."+decl.Name.Name] = true
						}
					}
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok || !ts.Name.IsExported() || !strings.HasSuffix(ts.Name.Name, "Config") {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					structs = append(structs, checkConfigFields(t, pkg, ts.Name.Name, st))
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, structs)

	embedded := map[string]bool{} // "pkg.Type" embedded in a Config with the methods
	for _, s := range structs {
		if methods[s.pkg+"."+s.name+".validate"] && methods[s.pkg+"."+s.name+".withDefaults"] {
			for _, e := range s.embeds {
				embedded[s.pkg+"."+e] = true
			}
		}
	}
	for _, s := range structs {
		if !s.numeric || embedded[s.pkg+"."+s.name] {
			continue
		}
		for _, m := range []string{"validate", "withDefaults"} {
			// logical.Config's Validate is exported: projection and
			// subscription check the logical.Config they are given with it.
			has := methods[s.pkg+"."+s.name+"."+m] || m == "validate" && methods[s.pkg+"."+s.name+".Validate"]
			require.Truef(t, has, "%s.%s has numeric fields but no (c *%s) %s (docs/CONVENTIONS.md \"Config\")",
				s.pkg, s.name, s.name, m)
		}
	}
}

// checkConfigFields checks the comment of every field of st.
func checkConfigFields(t *testing.T, pkg, name string, st *ast.StructType) configStruct {
	t.Helper()
	cs := configStruct{pkg: pkg, name: name}
	for _, field := range st.Fields.List {
		fieldName := typeString(field.Type)
		if len(field.Names) > 0 {
			fieldName = field.Names[0].Name
		} else if id, ok := field.Type.(*ast.Ident); ok && strings.HasSuffix(id.Name, "Config") {
			cs.embeds = append(cs.embeds, id.Name)
		}
		where := pkg + "." + name + "." + fieldName
		if field.Names != nil && !field.Names[0].IsExported() {
			continue
		}
		require.NotNilf(t, field.Doc, "%s has no comment", where)
		doc := strings.Join(strings.Fields(field.Doc.Text()), " ")
		if len(field.Names) == 0 {
			continue // an embedded struct: its own fields are checked
		}
		switch typeString(field.Type) {
		case "int", "int64", "time.Duration":
			cs.numeric = true
			require.Regexpf(t, zeroMeansDefaultRe, doc, "%s: the comment must say what 0 means (\"0: the default, …\")", where)
		default:
			require.Regexpf(t, `(?i)\bdefault`, doc, "%s: the comment must say the default (\"Default …\", or \"No default\" when required)", where)
		}
	}
	return cs
}

// typeString renders a field type as written, for the few forms a Config uses.
func typeString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return typeString(e.X) + "." + e.Sel.Name
	case *ast.StarExpr:
		return "*" + typeString(e.X)
	}
	return "?"
}
