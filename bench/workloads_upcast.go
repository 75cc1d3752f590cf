package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/upcast"
)

// upcastWorkloads are the read workloads again on a store with 1 and with 3
// chained upcasters on every fixture type (each renames a field of every
// event read: the fixture's events are all version 1), against the same
// read without upcasters as a baseline in the same run.
func upcastWorkloads(size int, quick, large bool) []Workload {
	var ws []Workload
	for _, n := range []int{1, 3} {
		sfx := "/upcast" + strconv.Itoa(n) + "/" + sizeName(size)
		ws = append(ws,
			Workload{Name: "read/project-entity" + sfx, Group: "read", Writers: 1, Fixture: size, Quick: quick, Large: large,
				Prepare: prepareUpcast(n, prepareProject)},
			Workload{Name: "read/type-stream" + sfx, Group: "read", Writers: 1, Fixture: size, Quick: quick, Large: large,
				Prepare: prepareUpcast(n, prepareTypeStream)},
		)
	}
	return ws
}

// upcastRegistry chains n upcasters on every type of the fixture; step i
// renames the field "amount" (then "amount<i>") to "amount<i+1>".
func upcastRegistry(n int) (*upcast.Registry, error) {
	var r upcast.Registry
	types := []string{markerType}
	for i := range 7 {
		types = append(types, "BenchEvent"+strconv.Itoa(i))
	}
	for _, t := range types {
		for i := 1; i <= n; i++ {
			from, to := "amount", "amount"+strconv.Itoa(i+1)
			if i > 1 {
				from = "amount" + strconv.Itoa(i)
			}
			if err := r.Register(t, i, renameField(from, to)); err != nil {
				return nil, err
			}
		}
	}
	return &r, nil
}

func renameField(from, to string) upcast.Func {
	return func(d json.RawMessage) (json.RawMessage, error) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(d, &m); err != nil {
			return nil, err
		}
		v, ok := m[from]
		if !ok {
			return nil, fmt.Errorf("no field %q", from)
		}
		delete(m, from)
		m[to] = v
		return json.Marshal(m)
	}
}

// prepareUpcast is prepare's workload on a store with n upcasters; the
// same workload on the plain store is its baseline ("no upcasters"), and
// the raw SELECT its floor. It checks that the events read are upcast.
func prepareUpcast(n int, prepare func(context.Context, *Env) (*Plan, error)) func(context.Context, *Env) (*Plan, error) {
	return func(ctx context.Context, env *Env) (*Plan, error) {
		reg, err := upcastRegistry(n)
		if err != nil {
			return nil, err
		}
		st, err := eventstore.New(env.Pool, &eventstore.Config{Schema: env.Schema, GroupCommitDisabled: true, Upcasters: reg})
		if err != nil {
			return nil, err
		}
		evs, _, err := st.ReadAll(ctx, query.Tagged(nil, "entity=1"), &pgdcb.ReadOptions{Limit: 1})
		if err != nil {
			return nil, err
		}
		var m map[string]json.RawMessage
		if len(evs) != 1 || json.Unmarshal(evs[0].Data, &m) != nil || m["amount"+strconv.Itoa(n+1)] == nil {
			return nil, fmt.Errorf("SELF-CHECK FAILED: the upcasters did not run (%d events)", len(evs))
		}
		base, err := prepare(ctx, env)
		if err != nil {
			return nil, err
		}
		upEnv := *env
		upEnv.Store = st
		p, err := prepare(ctx, &upEnv)
		if err != nil {
			return nil, err
		}
		p.Baselines = append(p.Baselines, Baseline{Name: "no upcasters", Op: base.Op})
		return p, nil
	}
}
