package eventstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/seal"
)

// KeyWrapper holds the key-encryption key (KEK) under which the store keeps
// subjects' data keys (docs/LIFECYCLE.md, "Erasing a person's data"): the
// subject_keys table stores only what WrapKey returned, and a read opens a
// sealed field with the key UnwrapKey gives back. Implement it over a KMS
// (the KEK never leaves it), or use NewAESKeyWrapper with a key kept out of
// the database. Both methods must be safe for concurrent use; UnwrapKey's
// results are cached in memory, by key, for the store's life.
type KeyWrapper interface {
	WrapKey(ctx context.Context, dataKey []byte) (wrapped []byte, err error)
	UnwrapKey(ctx context.Context, wrapped []byte) (dataKey []byte, err error)
}

// NewAESKeyWrapper returns a KeyWrapper that seals data keys with
// AES-256-GCM under kek, which must be 32 bytes (a random key kept in a
// secret store, never in the database it protects).
func NewAESKeyWrapper(kek []byte) (KeyWrapper, error) {
	if len(kek) != seal.KeySize {
		return nil, fmt.Errorf("pgdcb: key-encryption key: need %d bytes, got %d", seal.KeySize, len(kek))
	}
	a, err := seal.AEAD(kek)
	if err != nil {
		return nil, fmt.Errorf("pgdcb: key-encryption key: %w", err)
	}
	return aesWrapper{a: a}, nil
}

type aesWrapper struct {
	a interface {
		NonceSize() int
		Seal(dst, nonce, plaintext, additionalData []byte) []byte
		Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error)
	}
}

var wrapAAD = []byte("pgdcb.subject_key")

func (w aesWrapper) WrapKey(_ context.Context, key []byte) ([]byte, error) {
	nonce := make([]byte, w.a.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return w.a.Seal(nonce, nonce, key, wrapAAD), nil
}

func (w aesWrapper) UnwrapKey(_ context.Context, wrapped []byte) ([]byte, error) {
	n := w.a.NonceSize()
	if len(wrapped) < n {
		return nil, errors.New("pgdcb: unwrap key: too short")
	}
	k, err := w.a.Open(nil, wrapped[:n], wrapped[n:], wrapAAD)
	if err != nil {
		return nil, fmt.Errorf("pgdcb: unwrap key: %w", err)
	}
	return k, nil
}

// keyring is the store's side of subject_keys: it makes keys, takes the
// subject locks of sealed appends and finds keys for reads.
type keyring struct {
	s *Store

	mu     sync.Mutex
	cache  map[string]cachedKey // key_id → unwrapped key
	pool   *pgxpool.Pool        // lookups (lookupPool); nil until the first
	closed bool                 // Close ran: lookups use the store's pool
}

// lookupPoolSize is the most connections the key look-ups and key making
// hold.
const lookupPoolSize = 2

// lookupPool is the pool the reads' key look-ups and the sealed appends'
// key making (create) use: a small one of its own on the store's primary,
// made at first use and closed by Close, so that a read streaming (or an
// append in its transaction) on a connection of the store's pool never
// waits for a second one from it (callers that each hold one and wait for
// another would wait for ever once the pool is exhausted).
func (k *keyring) lookupPool(ctx context.Context) (*pgxpool.Pool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return k.s.pool, nil
	}
	if k.pool == nil {
		cfg := k.s.pool.Config()
		cfg.MaxConns, cfg.MinConns = lookupPoolSize, 0
		p, err := pgxpool.NewWithConfig(context.WithoutCancel(ctx), cfg)
		if err != nil {
			return nil, err
		}
		k.pool = p
	}
	return k.pool, nil
}

// close closes the look-up pool (Store.Close).
func (k *keyring) close() {
	k.mu.Lock()
	p := k.pool
	k.pool, k.closed = nil, true
	k.mu.Unlock()
	if p != nil {
		p.Close()
	}
}

type cachedKey struct {
	subject string
	key     []byte
}

// unwrap returns the data key of row (keyID, wrapped), from the cache when
// it has it. Only a row read from subject_keys may be passed: the cache
// never says a key exists.
func (k *keyring) unwrap(ctx context.Context, subject, keyID string, wrapped []byte) ([]byte, error) {
	k.mu.Lock()
	c, ok := k.cache[keyID]
	k.mu.Unlock()
	if ok {
		return c.key, nil
	}
	key, err := k.s.cfg.KEK.UnwrapKey(ctx, wrapped)
	if err != nil {
		return nil, err
	}
	if len(key) != seal.KeySize {
		return nil, fmt.Errorf("pgdcb: unwrap key: got %d bytes, want %d", len(key), seal.KeySize)
	}
	k.mu.Lock()
	if k.cache == nil {
		k.cache = make(map[string]cachedKey)
	}
	k.cache[keyID] = cachedKey{subject: subject, key: key}
	k.mu.Unlock()
	return key, nil
}

// forget drops subject's keys from the cache (Erase).
func (k *keyring) forget(subject string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for id, c := range k.cache {
		if c.subject == subject {
			delete(k.cache, id)
		}
	}
}

// create makes a key for each of subjects that has none, in transactions of
// its own on the look-up pool (a key that is never used costs a row): a
// sealed append calls it holding a connection of the store's pool, and
// must not wait for a second one from it (appends that each hold one would
// wait for ever once the pool is exhausted).
func (k *keyring) create(ctx context.Context, subjects []string) error {
	s := k.s
	pool, err := k.lookupPool(ctx)
	if err != nil {
		return err
	}
	rows, err := pool.Query(ctx, `SELECT subject FROM `+s.schema+`.subject_keys WHERE subject = ANY($1)`, subjects)
	if err != nil {
		return err
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, sub := range subjects {
		if contains(have, sub) {
			continue
		}
		key := seal.NewKey()
		wrapped, err := s.cfg.KEK.WrapKey(ctx, key)
		if err != nil {
			return fmt.Errorf("wrap key: %w", err)
		}
		// subject_keys_pkey: a racing append that made the key first wins.
		if _, err := pool.Exec(ctx, `INSERT INTO `+s.schema+`.subject_keys (subject, key_id, wrapped)
			VALUES ($1, gen_random_uuid(), $2) ON CONFLICT (subject) DO NOTHING`, sub, wrapped); err != nil {
			return err
		}
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// subjectLockKey is the advisory lock a sealed append holds in shared mode
// on each of its subjects from reading their keys to its commit, and Erase
// in exclusive mode: no append seals under a key that Erase destroys.
func subjectLockKey(schema, subject string) int64 { return lockKey(schema, kindSubject, subject) }

// lockKeys takes the subject locks (shared, ascending key order, one
// statement each) in tx, then, in a later statement (a snapshot taken after
// the locks: an Erase that committed while the lock waited is seen), reads
// the subjects' keys. missing lists the subjects that have none.
func (k *keyring) lockKeys(ctx context.Context, tx dbtx, subjects []string) (keys map[string]seal.Key, missing []string, err error) {
	s := k.s
	locks := make([]int64, 0, len(subjects))
	for _, sub := range subjects {
		locks = append(locks, subjectLockKey(s.cfg.Schema, sub))
	}
	ls := sortedLocks(func() map[int64]bool {
		m := make(map[int64]bool, len(locks))
		for _, l := range locks {
			m[l] = false
		}
		return m
	}())
	b := &pgx.Batch{}
	for _, l := range ls.keys {
		b.Queue(`SELECT pg_advisory_xact_lock_shared($1)`, l)
	}
	// subject_keys_pkey.
	b.Queue(`SELECT subject, key_id::text, wrapped FROM `+s.schema+`.subject_keys WHERE subject = ANY($1)`, subjects)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for range ls.keys {
		if _, err := br.Exec(); err != nil {
			return nil, nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	type row struct {
		subject, id string
		wrapped     []byte
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.subject, &r.id, &r.wrapped); err != nil {
			rows.Close()
			return nil, nil, err
		}
		got = append(got, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if err := br.Close(); err != nil {
		return nil, nil, err
	}
	keys = make(map[string]seal.Key, len(got))
	for _, r := range got {
		key, err := k.unwrap(ctx, r.subject, r.id, r.wrapped)
		if err != nil {
			return nil, nil, err
		}
		keys[r.subject] = seal.Key{ID: r.id, Key: key}
	}
	for _, sub := range subjects {
		if _, ok := keys[sub]; !ok {
			missing = append(missing, sub)
		}
	}
	return keys, missing, nil
}

// openEvents opens the sealed fields of evs in place (the read pipeline's
// first step): it looks the batch's keys up in one statement on the
// primary (lookupPool: once Erase has returned, no read anywhere opens the
// subject's fields, a standby's included, whatever its lag), and gives
// null where a key is gone. Without Config.KEK it leaves evs as
// stored.
func (k *keyring) openEvents(ctx context.Context, evs []pgdcb.StoredEvent) error {
	if k.s.cfg.KEK == nil {
		return nil
	}
	var ids []string
	for i := range evs {
		ids = append(ids, seal.KeyIDs(evs[i].Data)...)
		ids = append(ids, seal.KeyIDs(evs[i].Metadata)...)
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	keys, err := k.load(ctx, slices.Compact(ids))
	if err != nil {
		return errf("read: subject keys", err)
	}
	key := func(id string) ([]byte, bool) {
		b, ok := keys[id]
		return b, ok
	}
	for i := range evs {
		evs[i].Data = seal.Open(evs[i].Data, key)
		if evs[i].Metadata != nil {
			evs[i].Metadata = seal.Open(evs[i].Metadata, key)
		}
	}
	return nil
}

// load returns the data keys of ids that subject_keys still holds.
func (k *keyring) load(ctx context.Context, ids []string) (map[string][]byte, error) {
	s := k.s
	uuids := make([]uuid.UUID, 0, len(ids))
	for _, id := range ids {
		if u, err := uuid.Parse(id); err == nil { // another id opens nothing
			uuids = append(uuids, u)
		}
	}
	pool, err := k.lookupPool(ctx)
	if err != nil {
		return nil, err
	}
	// subject_keys_key_id_key.
	rows, err := pool.Query(ctx, `SELECT subject, key_id::text, wrapped FROM `+s.schema+`.subject_keys
		WHERE key_id = ANY($1)`, uuids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string][]byte, len(ids))
	for rows.Next() {
		var sub, id string
		var wrapped []byte
		if err := rows.Scan(&sub, &id, &wrapped); err != nil {
			return nil, err
		}
		key, err := k.unwrap(ctx, sub, id, wrapped)
		if err != nil {
			return nil, err
		}
		out[id] = key
	}
	return out, rows.Err()
}
