package backup

import (
	"strings"
	"testing"
)

func TestStatementsTakeTheirValuesFromTheEnvironment(t *testing.T) {
	env := map[string]string{"A": "pa", "B": "pb"}
	got, err := Statements("ALTER USER 'x' IDENTIFIED BY '${A}';\nALTER USER 'y' IDENTIFIED BY '${B}';\n", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "ALTER USER 'x' IDENTIFIED BY 'pa'" || got[1] != "ALTER USER 'y' IDENTIFIED BY 'pb'" {
		t.Errorf("statements %q", got)
	}
	_, err = Statements("SET x = '${A}';\nSET y = '${C}';\nSET z = '${C}';\n", func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "no value for C") || strings.Count(err.Error(), "C") != 1 {
		t.Errorf("a missing value is named once: %v", err)
	}
}

func TestSameGTIDsComparesSetsNotText(t *testing.T) {
	u := "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	if err := sameGTIDs(u+":1-3:4-5", u+":1-5"); err != nil {
		t.Errorf("the same set written two ways: %v", err)
	}
	if err := sameGTIDs(u+":1-4", u+":1-5"); err == nil {
		t.Error("a set short of the backup's is refused")
	}
	if err := sameGTIDs("", u+":1-5"); err == nil {
		t.Error("an empty set is refused")
	}
}
