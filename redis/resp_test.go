package redis

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// A minimal RESP2 reader for the test harness's raw commands (rawDo): it
// needs no client library, so it runs anywhere, TestMain included.

type lineReader struct{ *bufio.Reader }

func newLineReader(r io.Reader) lineReader { return lineReader{bufio.NewReader(r)} }

func (r lineReader) line() (string, error) {
	s, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(s, "\r\n"), nil
}

// readRESP reads one reply: a string, an int64, nil, a []any, or an
// error for an error reply.
func readRESP(r lineReader) (any, error) {
	l, err := r.line()
	if err != nil {
		return nil, err
	}
	if l == "" {
		return nil, errors.New("empty RESP line")
	}
	switch l[0] {
	case '+':
		return l[1:], nil
	case '-':
		return nil, errors.New(l[1:])
	case ':':
		return strconv.ParseInt(l[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(l[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(l[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		a := make([]any, n)
		for i := range a {
			v, err := readRESP(r)
			if err != nil && !isReplyErr(err) {
				return nil, err
			}
			if err != nil {
				v = err
			}
			a[i] = v
		}
		return a, nil
	}
	return nil, fmt.Errorf("unexpected RESP line %q", l)
}

func isReplyErr(err error) bool { return err != nil && !errors.Is(err, io.EOF) }

func sortStrings(s []string) { sort.Strings(s) }

// keySlot is Redis Cluster's HASH_SLOT(key): CRC16 (XMODEM) of the hash
// tag, or of the whole key, mod 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
