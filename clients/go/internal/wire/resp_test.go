package wire

import (
	"bufio"
	"reflect"
	"strings"
	"testing"
)

// The replies LOCK.* and the handshake get, as a server sends them
// (RESP2), and the RESP3 types a server could send.
func TestReadValue(t *testing.T) {
	long := strings.Repeat("x", 10000)
	for _, c := range []struct {
		wire string
		want interface{}
	}{
		{":1\r\n", int64(1)},
		{"$-1\r\n", nil},
		{"*-1\r\n", nil},
		{"+OK\r\n", "OK"},
		{"$0\r\n\r\n", ""},
		{"-NOTOWNER not held\r\n", ServerError("NOTOWNER not held")},
		{"-ERR " + long + "\r\n", ServerError("ERR " + long)},
		{"*2\r\n:3\r\n:1700000000000001\r\n", []interface{}{int64(3), int64(1700000000000001)}},
		{"*4\r\n$5\r\nowner\r\n$2\r\nme\r\n$5\r\nholds\r\n:1\r\n", []interface{}{"owner", "me", "holds", int64(1)}},
		{"%1\r\n+owner\r\n$2\r\nme\r\n", []interface{}{"owner", "me"}},
		{"_\r\n", nil},
		{"#t\r\n", true},
	} {
		got, err := readValue(bufio.NewReaderSize(strings.NewReader(c.wire), 4096))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%.40q: got %#v, %v", c.wire, got, err)
		}
	}
	for _, bad := range []string{"?\r\n", ":x\r\n", "$5\r\nab", "+OK\n"} {
		if _, err := readValue(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestAppendCommand(t *testing.T) {
	got := string(appendCommand(nil, []interface{}{"LOCK.ACQUIRE", "k\x00", int64(30000)}))
	want := "*3\r\n$12\r\nLOCK.ACQUIRE\r\n$2\r\nk\x00\r\n$5\r\n30000\r\n"
	if got != want {
		t.Fatalf("got %q", got)
	}
}
