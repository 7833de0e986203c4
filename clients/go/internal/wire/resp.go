// Package wire is the connection the library owns: RESP2 over one socket,
// one command (or one pipelined group) at a time, read by a goroutine of its
// own so that a closed or reset socket is seen the moment it happens, even
// while no command is in flight. That is what the loss signal of a held
// KEEPALIVE lock and the pool's health rest on.
//
// go-redis is not used for these connections on purpose: a blocked read on
// a go-redis connection cannot be interrupted by cancelling a context, its
// retries would queue a waiter twice, and its pool hides which socket a
// command used. go-redis still provides the dialer, the credentials and the
// cluster topology.
package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// ServerError is an error reply of the server ("-NOTOWNER ..."), verbatim.
type ServerError string

func (e ServerError) Error() string { return string(e) }

// maxBulk bounds a bulk reply (LOCK.* replies are small; this only stops a
// desynchronised stream from allocating gigabytes).
const maxBulk = 512 << 20

var errProtocol = errors.New("wire: protocol error")

// appendCommand appends one command as a RESP array of bulk strings.
func appendCommand(b []byte, args []interface{}) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		var s string
		switch v := a.(type) {
		case string:
			s = v
		case []byte:
			s = string(v)
		case int:
			s = strconv.Itoa(v)
		case int64:
			s = strconv.FormatInt(v, 10)
		case uint64:
			s = strconv.FormatUint(v, 10)
		default:
			s = fmt.Sprint(v)
		}
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, '\r', '\n')
		b = append(b, s...)
		b = append(b, '\r', '\n')
	}
	return b
}

// readValue reads one reply: nil (nil bulk or array), string (simple or
// bulk), int64, []interface{} or ServerError. RESP3 types are accepted too,
// so a server that answers them does not desynchronise the stream.
func readValue(r *bufio.Reader) (interface{}, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, errProtocol
	}
	body := string(line[1:])
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return ServerError(body), nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: bad integer %q", errProtocol, body)
		}
		return n, nil
	case '$', '=', '!':
		n, err := strconv.Atoi(body)
		if err != nil || n > maxBulk {
			return nil, fmt.Errorf("%w: bad length %q", errProtocol, body)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		if line[0] == '!' {
			return ServerError(buf[:n]), nil
		}
		return string(buf[:n]), nil
	case '*', '~', '>', '%':
		n, err := strconv.Atoi(body)
		if err != nil || n > maxBulk {
			return nil, fmt.Errorf("%w: bad length %q", errProtocol, body)
		}
		if n < 0 {
			return nil, nil
		}
		if line[0] == '%' {
			n *= 2
		}
		out := make([]interface{}, n)
		for i := range out {
			if out[i], err = readValue(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	case '_':
		return nil, nil
	case '#':
		return body == "t", nil
	case ',', '(':
		return body, nil
	}
	return nil, fmt.Errorf("%w: unexpected %q", errProtocol, line)
}

func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		// A line longer than the buffer (a long error message): collect it.
		long := append([]byte(nil), line...)
		for errors.Is(err, bufio.ErrBufferFull) && len(long) <= maxBulk {
			line, err = r.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: line without CRLF", errProtocol)
	}
	return line[:len(line)-2], nil
}
