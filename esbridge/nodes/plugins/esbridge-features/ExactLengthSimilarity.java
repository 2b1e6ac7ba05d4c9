package org.esbridge.features;

import org.apache.lucene.index.FieldInvertState;
import org.apache.lucene.search.CollectionStatistics;
import org.apache.lucene.search.Explanation;
import org.apache.lucene.search.TermStatistics;
import org.apache.lucene.search.similarities.Similarity;

/**
 * The engine's own BM25, with a norm that also keeps each document's exact length and number of
 * distinct terms in the field, so that the fetch sub-phase can read them from the norms instead
 * of stored term vectors (which then need not be stored at all).
 *
 * A norm is one long per document and field: bits 56-63 hold the one-byte length the wrapped
 * BM25 computes (Lucene's lossy {@code SmallFloat.intToByte4} of the length it scores by),
 * bits 28-55 the exact length (the number of tokens, as a stored term vector's frequencies add
 * up) and bits 0-27 the number of distinct terms.  Scoring reads the top byte only and hands it
 * to the wrapped BM25: the engine's scores are exactly those of the same field without this
 * similarity.  Norms grow with the length (the top byte first, then the exact length), as
 * Lucene's block-max scoring and the engine's checks of a similarity require.
 *
 * Registered as the similarity type {@link #TYPE}; its settings are BM25's ({@code k1},
 * {@code b}, {@code discount_overlaps}).
 */
final class ExactLengthSimilarity extends Similarity {
    static final String TYPE = "esbridge_bm25";
    static final int BITS = 28;
    static final long MASK = (1L << BITS) - 1;

    private final Similarity bm25;

    ExactLengthSimilarity(Similarity bm25) {
        this.bm25 = bm25;
    }

    @Override
    public long computeNorm(FieldInvertState state) {
        long scored = bm25.computeNorm(state) & 0xFF;
        long length = state.getLength();
        long distinct = state.getUniqueTermCount();
        if (length > MASK) {
            throw new IllegalArgumentException("field [" + state.getName() + "] has " + length
                + " tokens; an esbridge index keeps at most " + MASK + " a field of a document");
        }
        return (scored << 56) | (length << BITS) | distinct;
    }

    /** The exact length kept in {@code norm}. */
    static int length(long norm) {
        return (int) ((norm >>> BITS) & MASK);
    }

    /** The number of distinct terms kept in {@code norm}. */
    static int distinct(long norm) {
        return (int) (norm & MASK);
    }

    @Override
    public SimScorer scorer(float boost, CollectionStatistics collectionStats, TermStatistics... termStats) {
        SimScorer inner = bm25.scorer(boost, collectionStats, termStats);
        return new SimScorer() {
            @Override
            public float score(float freq, long norm) {
                return inner.score(freq, norm >>> 56);
            }

            @Override
            public Explanation explain(Explanation freq, long norm) {
                return inner.explain(freq, norm >>> 56);
            }
        };
    }

    @Override
    public String toString() {
        return TYPE + "(" + bm25 + ")";
    }
}
