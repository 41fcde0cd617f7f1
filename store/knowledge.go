package store

import (
	"context"
	"fmt"
	"time"
)

// KnowledgeHit is a document that matched a full-text search.
type KnowledgeHit struct {
	Slug  string
	Title string
	Kind  string
	Tags  []string
	// Entities are the slugs the document is linked to.
	Entities []string
	Rank     float64
	// Snippet is the best passage of the body, matched words between « and ».
	Snippet string
	// Loose is true when no document had every word and this one matched
	// only some of them.
	Loose bool
}

// SearchKnowledge searches titles, tags and bodies with Postgres full-text
// search (web-search syntax: words, "phrases", -exclusions, or), ranked by
// ts_rank with the title weighted above tags above the body. When no
// document has every word, it searches again for documents with any of
// them, and marks those hits Loose.
func (s *Store) SearchKnowledge(ctx context.Context, query string, limit int) ([]KnowledgeHit, error) {
	if limit <= 0 {
		limit = 5
	}
	hits, err := s.searchKnowledge(ctx, `websearch_to_tsquery('english', $1)`, query, limit)
	if err != nil || len(hits) > 0 {
		return hits, err
	}
	// Natural questions rarely have every word in one document: loosen the
	// conjunction to a disjunction and let the rank sort it out.
	hits, err = s.searchKnowledge(ctx,
		`nullif(replace(websearch_to_tsquery('english', $1)::text, ' & ', ' | '), '')::tsquery`, query, limit)
	for i := range hits {
		hits[i].Loose = true
	}
	return hits, err
}

func (s *Store) searchKnowledge(ctx context.Context, tsquery, query string, limit int) ([]KnowledgeHit, error) {
	rows, err := s.pool.Query(ctx, `WITH q AS (SELECT `+tsquery+` AS q)
		SELECT d.slug, d.title, d.kind, d.tags,
			coalesce(array(SELECT e.slug FROM entities e WHERE e.id = ANY(d.entity_ids) ORDER BY e.slug), '{}'),
			ts_rank(d.search, q.q) AS rank,
			ts_headline('english', d.body, q.q,
				'StartSel=«, StopSel=», MaxWords=35, MinWords=12, MaxFragments=2, FragmentDelimiter=" … "')
		FROM knowledge_docs d, q
		WHERE q.q IS NOT NULL AND d.search @@ q.q
		ORDER BY rank DESC, d.slug
		LIMIT $2`, query, limit)
	if err != nil {
		return nil, fmt.Errorf("search knowledge for %q: %w", query, err)
	}
	defer rows.Close()
	var out []KnowledgeHit
	for rows.Next() {
		var h KnowledgeHit
		if err := rows.Scan(&h.Slug, &h.Title, &h.Kind, &h.Tags, &h.Entities, &h.Rank, &h.Snippet); err != nil {
			return nil, fmt.Errorf("search knowledge for %q: %w", query, err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// LinkedDoc is a knowledge document reached from an entity.
type LinkedDoc struct {
	Slug      string
	Title     string
	Kind      string
	Tags      []string
	Body      string
	UpdatedAt time.Time
	// Via is the entity the document is linked to: the entity asked about
	// or one of its neighbours.
	Via string
	// Relation is how Via relates to the entity asked about: "self", or an
	// edge such as "runs" (the entity runs Via) or "depends_on<-" (Via
	// depends on the entity).
	Relation string
	// Hops is 0 for a document linked to the entity itself, 1 through a
	// neighbour.
	Hops int
}

// KnowledgeForEntity returns the documents linked to an entity directly, or
// to any entity one relationship away in either direction, nearest first.
// A document is listed once, through its nearest link. It returns
// ErrNotFound when no entity has the slug.
func (s *Store) KnowledgeForEntity(ctx context.Context, slug string, limit int) ([]LinkedDoc, error) {
	if limit <= 0 {
		limit = 10
	}
	if _, err := s.EntityBySlug(ctx, slug); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `WITH t AS (SELECT id FROM entities WHERE slug = $1),
		near AS (
			SELECT t.id, 'self'::text AS relation, 0 AS hops FROM t
			UNION ALL
			SELECT r.to_id, r.type, 1 FROM relationships r JOIN t ON r.from_id = t.id
			UNION ALL
			SELECT r.from_id, r.type || '<-', 1 FROM relationships r JOIN t ON r.to_id = t.id
		),
		linked AS (
			SELECT DISTINCT ON (d.id) d.slug, d.title, d.kind, d.tags, d.body, d.updated_at,
				e.slug AS via, n.relation, n.hops
			FROM knowledge_docs d
			JOIN near n ON n.id = ANY(d.entity_ids)
			JOIN entities e ON e.id = n.id
			ORDER BY d.id, n.hops, e.slug
		)
		SELECT slug, title, kind, tags, body, updated_at, via, relation, hops
		FROM linked ORDER BY hops, via, slug LIMIT $2`, slug, limit)
	if err != nil {
		return nil, fmt.Errorf("knowledge for %s: %w", slug, err)
	}
	defer rows.Close()
	var out []LinkedDoc
	for rows.Next() {
		var d LinkedDoc
		if err := rows.Scan(&d.Slug, &d.Title, &d.Kind, &d.Tags, &d.Body, &d.UpdatedAt, &d.Via, &d.Relation, &d.Hops); err != nil {
			return nil, fmt.Errorf("knowledge for %s: %w", slug, err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
