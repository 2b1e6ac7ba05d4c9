package org.esbridge.features;

import org.apache.lucene.index.Fields;
import org.apache.lucene.index.IndexReader;
import org.apache.lucene.index.LeafReader;
import org.apache.lucene.index.Terms;
import org.apache.lucene.index.TermsEnum;
import org.apache.lucene.index.TermVectors;
import org.apache.lucene.util.BytesRef;

import java.io.IOException;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Each document's length (the sum of its terms' frequencies) and number of distinct terms in one
 * field of one segment: read from the document's stored term vector the first time a search asks
 * for them, and kept while the segment is open.
 *
 * A segment never changes, so the numbers stay exact for its life; they are dropped when the
 * segment is closed (merged away, or its index deleted).  Memory: two ints per document of the
 * segment per field asked for.  A document no search has asked about costs one term-vector read;
 * one already read, nothing.
 */
final class SegmentLengths {
    private static final Map<IndexReader.CacheKey, Map<String, SegmentLengths>> CACHE = new ConcurrentHashMap<>();

    /** per document: length and distinct terms, -1 while not read yet */
    final int[] length;
    final int[] distinct;

    private SegmentLengths(int maxDoc) {
        length = new int[maxDoc];
        distinct = new int[maxDoc];
        Arrays.fill(length, -1);
        Arrays.fill(distinct, -1);
    }

    /** The arrays of {@code field} in {@code reader}'s segment (shared while the segment is open). */
    static SegmentLengths of(LeafReader reader, String field) {
        IndexReader.CacheHelper helper = reader.getCoreCacheHelper();
        if (helper == null) {
            return new SegmentLengths(reader.maxDoc());
        }
        Map<String, SegmentLengths> perField = CACHE.computeIfAbsent(helper.getKey(), key -> {
            helper.addClosedListener(CACHE::remove);
            return new ConcurrentHashMap<>();
        });
        return perField.computeIfAbsent(field, f -> new SegmentLengths(reader.maxDoc()));
    }

    /**
     * Fills in {@code doc}'s numbers for those of {@code fields} not known yet, from one read of
     * its term vectors ({@code lengths[k]} are the arrays of {@code fields[k]}).
     */
    static void load(TermVectors vectors, int doc, String[] fields, SegmentLengths[] lengths) throws IOException {
        Fields all = null;
        for (int k = 0; k < fields.length; k++) {
            SegmentLengths l = lengths[k];
            if (l == null || l.length[doc] >= 0) {
                continue;
            }
            if (all == null) {
                all = vectors.get(doc);
                if (all == null) {  // no term vector at all: the document has no indexed term in them
                    for (int m = k; m < fields.length; m++) {
                        if (lengths[m] != null && lengths[m].length[doc] < 0) {
                            lengths[m].distinct[doc] = 0;
                            lengths[m].length[doc] = 0;
                        }
                    }
                    return;
                }
            }
            Terms terms = all.terms(fields[k]);
            long sum = 0;
            long size = 0;
            if (terms != null) {
                sum = terms.getSumTotalTermFreq();
                size = terms.size();
                if (sum < 0 || size < 0) {  // a codec that does not keep them: count
                    sum = 0;
                    size = 0;
                    TermsEnum it = terms.iterator();
                    for (BytesRef t = it.next(); t != null; t = it.next()) {
                        sum += it.totalTermFreq();
                        size++;
                    }
                }
            }
            l.distinct[doc] = (int) size;
            l.length[doc] = (int) sum;  // written last: a reader that sees it sees distinct too
        }
    }
}
