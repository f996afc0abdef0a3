package redis

import (
	"context"
	"testing"

	"github.com/lfgrudge/grudge/decay"
)

func TestSmoke(t *testing.T) {
	srv := startServer(t)
	c := srv.client(t)
	s, err := New(c, Config{Name: "smoke", Hi: 1e9, Decay: decay.Exponential(0.1), CellsPerLevel: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Update(ctx, []byte("a"), 3); err != nil {
		t.Fatal(err)
	}
	v, err := s.Query(ctx, []byte("a"))
	t.Log(v, err)
	ok, err := s.TryUpdate(ctx, []byte("a"), 3, 5)
	t.Log(ok, err)
	ok, err = s.TryUpdate(ctx, []byte("a"), 1, 5)
	t.Log(ok, err)
	t.Log(do(t, c, "STRLEN", "{smoke}:g").ToInt64())
}
