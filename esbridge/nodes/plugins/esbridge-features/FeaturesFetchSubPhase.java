package org.esbridge.features;

import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.apache.lucene.analysis.tokenattributes.PositionIncrementAttribute;
import org.apache.lucene.index.FieldInfo;
import org.apache.lucene.index.FieldInfos;
import org.apache.lucene.index.IndexOptions;
import org.apache.lucene.index.IndexReader;
import org.apache.lucene.index.IndexReaderContext;
import org.apache.lucene.index.LeafReader;
import org.apache.lucene.index.LeafReaderContext;
import org.apache.lucene.index.NumericDocValues;
import org.apache.lucene.index.PostingsEnum;
import org.apache.lucene.index.Term;
import org.apache.lucene.index.TermState;
import org.apache.lucene.index.TermStates;
import org.apache.lucene.index.Terms;
import org.apache.lucene.index.TermsEnum;
import org.apache.lucene.index.TermVectors;
import org.apache.lucene.search.CollectionStatistics;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.TermStatistics;
import org.apache.lucene.search.similarities.PerFieldSimilarityWrapper;
import org.apache.lucene.search.similarities.Similarity;
import org.apache.lucene.util.BytesRef;
import org.apache.lucene.util.IOSupplier; //@opensearch
import org.opensearch.common.document.DocumentField; //@opensearch
import org.elasticsearch.common.document.DocumentField; //@elasticsearch
import org.opensearch.index.similarity.NonNegativeScoresSimilarity; //@opensearch
import org.elasticsearch.index.similarity.NonNegativeScoresSimilarity; //@elasticsearch
import org.opensearch.search.fetch.FetchContext; //@opensearch
import org.elasticsearch.search.fetch.FetchContext; //@elasticsearch
import org.opensearch.search.fetch.FetchSubPhase; //@opensearch
import org.elasticsearch.search.fetch.FetchSubPhase; //@elasticsearch
import org.opensearch.search.fetch.FetchSubPhaseProcessor; //@opensearch
import org.elasticsearch.search.fetch.FetchSubPhaseProcessor; //@elasticsearch
import org.elasticsearch.search.fetch.StoredFieldsSpec; //@elasticsearch

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Adds {@code _esbridge_features} to each hit: the request's tag and the hit's features packed in
 * one base64 string of little-endian integers ({@link #pack}: 16-bit where all fit, else 32-bit),
 * per group of its {@link FeaturesExt}
 * {@code length, distinct terms, tf of each term...} (length and distinct -1 where the group's
 * field is indexed without term frequencies or term vectors); a string decodes far faster than a
 * JSON list of numbers, which matters at a thousand hits. And {@code _esbridge_stats} to the
 * first hit of each shard: per requested field, {@code [doc_count, sum_ttf, df of each term...]}
 * as the shard's searcher reports them (the aggregated statistics of the DFS phase where it ran).
 *
 * With {@link FeaturesExt.Analyze} the terms are the text's as each field's index analyzer makes
 * them, and the first hit of each shard also gets {@code _esbridge_query}: per analysed field
 * {@code [[position...], [term...]]}, its tokens in the order of their positions (tokens at one
 * position in the order of their UTF-8 bytes); each group's terms are the distinct ones in that
 * order.
 *
 * Term frequencies come from the postings (one enumerator per term and segment, advanced through
 * the segment's hits in document order; for a term whose statistics are asked for too, opened from
 * the one lookup of the term in each segment that the statistics need). Those lookups are shared
 * by the searches of one open index reader ({@link #LOOKUPS}): a term another search of the same
 * reader asked for is not looked up again; they are dropped when the reader closes (a refresh
 * opens a new one). Lengths and distinct-term
 * counts from the field's norms where its similarity is {@link ExactLengthSimilarity} (which keeps
 * them there exactly), else from {@link SegmentLengths}, which reads a document's term vector once
 * for the life of its segment.
 */
final class FeaturesFetchSubPhase implements FetchSubPhase {
    static final String FEATURES = "_esbridge_features";
    static final String STATS = "_esbridge_stats";
    static final String QUERY = "_esbridge_query";

    /** Per open top-level reader, per field: each term's lookup in every segment of that reader. */
    private static final Map<IndexReader.CacheKey, Lookups> LOOKUPS = new ConcurrentHashMap<>();
    /** How many terms one reader's shared lookups hold at most (all fields; each holds a term state per
     * segment); later ones are looked up by each search that asks for them. */
    static final int MAX_SHARED_TERMS = 10_000;
    /** How many open readers share lookups at most (a node's shards each have one, two while a
     * refresh is under way); beyond that a search looks its terms up itself. */
    static final int MAX_SHARING_READERS = 1_024;

    /** The lookups shared by the searches of one reader. */
    private static final class Lookups {
        final Map<String, Map<BytesRef, TermStates>> byField = new ConcurrentHashMap<>();
        final AtomicInteger size = new AtomicInteger();
    }

    /** The lookups shared by the searches of {@code searcher}'s reader (null: it has no cache key, or
     * {@link #MAX_SHARING_READERS} readers share already). */
    private static Lookups shared(IndexSearcher searcher) {
        IndexReader.CacheHelper helper = searcher.getIndexReader().getReaderCacheHelper();
        if (helper == null) {
            return null;
        }
        Lookups known = LOOKUPS.get(helper.getKey());
        if (known != null || LOOKUPS.size() >= MAX_SHARING_READERS) {
            return known;
        }
        return LOOKUPS.computeIfAbsent(helper.getKey(), key -> {
            helper.addClosedListener(LOOKUPS::remove);
            return new Lookups();
        });
    }

    private final FeaturesLimits limits;

    FeaturesFetchSubPhase(FeaturesLimits limits) {
        this.limits = limits;
    }

    /** One token of an analysed text: its position and its term. */
    private record Token(int position, BytesRef term) {
    }

    @Override
    public FetchSubPhaseProcessor getProcessor(FetchContext context) throws IOException {
        if (!(context.getSearchExt(FeaturesExt.NAME) instanceof FeaturesExt ext)) {
            return null;
        }
        // checked when the request was parsed; again here for an extension that came otherwise
        limits.check(ext.groups(), ext.stats(), ext.analyze());
        final IndexSearcher searcher = context.searcher();
        final List<FeaturesExt.Group> groups;
        final List<FeaturesExt.Stats> statsAsked;
        final List<Object> analysed;  // per analysed field [[position...], [term...]], or null
        FeaturesExt.Analyze analyze = ext.analyze();
        if (analyze == null) {
            groups = ext.groups();
            statsAsked = ext.stats();
            analysed = null;
        } else {
            groups = new ArrayList<>();
            statsAsked = new ArrayList<>();
            analysed = new ArrayList<>();
            Map<String, List<String>> termsOf = new HashMap<>();
            long asked = 0;  // the terms the analysis gives: each field's distinct terms, then each counted field's
            for (String field : analyze.fields()) {
                List<Token> tokens = analyse(context, field, analyze.text());
                List<Integer> positions = new ArrayList<>(tokens.size());
                List<String> texts = new ArrayList<>(tokens.size());
                LinkedHashSet<String> distinct = new LinkedHashSet<>();
                for (Token t : tokens) {
                    String term = t.term().utf8ToString();
                    positions.add(t.position());
                    texts.add(term);
                    distinct.add(term);
                }
                List<String> terms = List.copyOf(distinct);
                asked += terms.size();
                limits.checkTerms(asked, "analyze gives");
                statsAsked.add(new FeaturesExt.Stats(field, terms));
                termsOf.put(field, terms);
                analysed.add(List.of(positions, texts));
            }
            for (String field : analyze.count()) {  // the groups in the order count names them
                groups.add(new FeaturesExt.Group(List.of(field), termsOf.get(field)));
                asked += termsOf.get(field).size();
            }
            limits.checkTerms(asked, "analyze gives");
        }
        // the statistics asked for, each term's looked up once in every segment; where a group
        // counts such a term, its postings are then opened from that lookup's state
        final Map<String, Map<BytesRef, TermStates>> states = new HashMap<>();
        final Lookups sharedLookups = statsAsked.isEmpty() ? null : shared(searcher);
        for (FeaturesExt.Stats st : statsAsked) {
            lookUp(searcher, st, states.computeIfAbsent(st.field(), f -> new HashMap<>()), sharedLookups);
        }
        final List<BytesRef[]> groupTerms = new ArrayList<>();
        int columns = 0;
        for (FeaturesExt.Group g : groups) {
            groupTerms.add(bytes(g.terms()));
            columns += g.terms().size() + 2;
        }
        final int width = columns;
        final boolean[] fromNorms = new boolean[groups.size()];
        for (int i = 0; i < groups.size(); i++) {
            fromNorms[i] = exactNorms(searcher, groups.get(i).fields().get(0));
        }
        return new FetchSubPhaseProcessor() {
            private LeafReaderContext leaf;
            private LeafReader reader;
            private TermVectors vectors;
            /** per group: whether its field lacks frequencies or term vectors (or norms), whether the
             * segment has it, its lengths (from term vectors, or its norms), its postings per term */
            private boolean[] lacking;
            private boolean[] present;
            private String[] groupField;
            private SegmentLengths[] lengths;
            private NumericDocValues[] norms;
            private PostingsEnum[][] postings;
            private int lastDoc;
            private boolean statsSent;

            @Override
            public void setNextReader(LeafReaderContext readerContext) throws IOException {
                leaf = readerContext;
                reader = readerContext.reader();
                vectors = reader.termVectors();
                FieldInfos infos = reader.getFieldInfos();
                lacking = new boolean[groups.size()];
                present = new boolean[groups.size()];
                groupField = new String[groups.size()];
                lengths = new SegmentLengths[groups.size()];
                for (int i = 0; i < groups.size(); i++) {
                    groupField[i] = groups.get(i).fields().get(0);
                    FieldInfo info = infos.fieldInfo(groupField[i]);
                    if (info == null) {
                        continue;  // no document of this segment has the field
                    }
                    if (info.getIndexOptions().compareTo(IndexOptions.DOCS_AND_FREQS) < 0) {
                        lacking[i] = true;
                    } else if (fromNorms[i]) {
                        lacking[i] = !info.hasNorms();
                    } else if (!info.hasTermVectors()) { //@opensearch
                    } else if (!info.hasVectors()) { //@elasticsearch
                        lacking[i] = true;
                    } else {
                        lengths[i] = SegmentLengths.of(reader, groupField[i]);
                    }
                    present[i] = !lacking[i];
                }
                resetPostings();
            }

            private void resetPostings() throws IOException {
                postings = new PostingsEnum[groups.size()][];
                norms = new NumericDocValues[groups.size()];
                for (int i = 0; i < groups.size(); i++) {
                    BytesRef[] terms = groupTerms.get(i);
                    postings[i] = new PostingsEnum[terms.length];
                    if (present[i] && fromNorms[i]) {
                        norms[i] = reader.getNormValues(groupField[i]);
                    }
                    Terms inField = present[i] ? reader.terms(groupField[i]) : null;
                    if (inField == null) {
                        continue;
                    }
                    Map<BytesRef, TermStates> known = states.get(groupField[i]);
                    TermsEnum it = inField.iterator();
                    for (int j = 0; j < terms.length; j++) {
                        TermStates looked = known == null ? null : known.get(terms[j]);
                        if (looked != null) {
                            TermState state = stateIn(looked);
                            if (state == null) {
                                continue;  // the segment lacks the term
                            }
                            it.seekExact(terms[j], state);
                            postings[i][j] = it.postings(null, PostingsEnum.FREQS);
                        } else if (it.seekExact(terms[j])) {
                            postings[i][j] = it.postings(null, PostingsEnum.FREQS);
                        }
                    }
                }
                lastDoc = -1;
            }

            /** The term's state in the current segment, from its lookup (null: not in the segment). */
            private TermState stateIn(TermStates looked) throws IOException {
                IOSupplier<TermState> supplier = looked.get(leaf); //@opensearch
                return supplier == null ? null : supplier.get(); //@opensearch
                return looked.get(leaf); //@elasticsearch
            }

            @Override //@elasticsearch
            public StoredFieldsSpec storedFieldsSpec() { //@elasticsearch
                return StoredFieldsSpec.NO_REQUIREMENTS; //@elasticsearch
            } //@elasticsearch

            @Override
            public void process(HitContext hit) throws IOException {
                int doc = hit.docId();
                if (doc < lastDoc) {
                    resetPostings();  // hits come in document order; should one not, start over
                }
                lastDoc = doc;
                SegmentLengths.load(vectors, doc, groupField, lengths);
                IntBuffer values = IntBuffer.allocate(width);
                for (int i = 0; i < groups.size(); i++) {
                    group(i, doc, values);
                }
                String packed = Base64.getEncoder().encodeToString(pack(values.array()));
                hit.hit().setDocumentField(FEATURES, new DocumentField(FEATURES, List.of(List.of(ext.tag(), packed))));
                if (!statsSent && (!statsAsked.isEmpty() || analysed != null)) {
                    statsSent = true;
                    List<Object> stats = new ArrayList<>(statsAsked.size());
                    for (FeaturesExt.Stats s : statsAsked) {
                        stats.add(statistics(searcher, s, states.get(s.field())));
                    }
                    hit.hit().setDocumentField(STATS, new DocumentField(STATS, List.of(stats)));
                    if (analysed != null) {
                        hit.hit().setDocumentField(QUERY, new DocumentField(QUERY, List.of(analysed)));
                    }
                }
            }

            /** Appends [length, distinct, tf...] of group i's field for one document to out
             * (length and distinct -1 where the field is indexed without frequencies). */
            private void group(int i, int doc, IntBuffer out) throws IOException {
                int nTerms = groupTerms.get(i).length;
                if (lacking[i]) {
                    out.put(-1).put(-1);
                    for (int j = 0; j < nTerms; j++) {
                        out.put(0);
                    }
                    return;
                }
                int length = 0;
                int distinct = 0;
                if (lengths[i] != null) {
                    length = lengths[i].length[doc];
                    distinct = lengths[i].distinct[doc];
                } else if (norms[i] != null && norms[i].advanceExact(doc)) {  // no norm: no token in the field
                    long norm = norms[i].longValue();
                    length = ExactLengthSimilarity.length(norm);
                    distinct = ExactLengthSimilarity.distinct(norm);
                }
                out.put(length).put(distinct);
                for (int j = 0; j < nTerms; j++) {
                    PostingsEnum pe = postings[i][j];  // null where the segment lacks the term or the field
                    int tf = 0;
                    if (pe != null) {
                        if (pe.docID() < doc) {
                            pe.advance(doc);
                        }
                        if (pe.docID() == doc) {
                            tf = pe.freq();
                        }
                    }
                    out.put(tf);
                }
            }
        };
    }

    /** Whether {@code field} is scored by {@link ExactLengthSimilarity}, whose norms hold its exact
     * lengths and distinct terms. */
    private static boolean exactNorms(IndexSearcher searcher, String field) {
        Similarity similarity = searcher.getSimilarity();
        if (similarity instanceof PerFieldSimilarityWrapper perField) {
            similarity = perField.get(field);
        }
        if (similarity instanceof NonNegativeScoresSimilarity checked) {  // how the engine holds a plugin's
            similarity = checked.getDelegate();
        }
        return similarity instanceof ExactLengthSimilarity;
    }

    /** The values as little-endian 16-bit integers where every one fits, else as 32-bit ones
     * (the reader tells the two apart by the byte count). */
    static byte[] pack(int[] values) {
        boolean small = true;
        for (int v : values) {
            if (v < Short.MIN_VALUE || v > Short.MAX_VALUE) {
                small = false;
                break;
            }
        }
        ByteBuffer out = ByteBuffer.allocate((small ? 2 : 4) * values.length).order(ByteOrder.LITTLE_ENDIAN);
        for (int v : values) {
            if (small) {
                out.putShort((short) v);
            } else {
                out.putInt(v);
            }
        }
        return out.array();
    }

    /** Adds to {@code looked} the terms of {@code st} it lacks: from {@code shared} where another
     * search of the same reader looked them up, else each looked up in every segment of the
     * searcher's reader (one terms enumerator per segment for all of them; what
     * {@link TermStates#build} does with one per term) and then offered to {@code shared}. A
     * lookup is complete before it is shared, and never changed after. */
    private static void lookUp(IndexSearcher searcher, FeaturesExt.Stats st, Map<BytesRef, TermStates> looked,
                               Lookups shared) throws IOException {
        IndexReaderContext top = searcher.getTopReaderContext();
        Map<BytesRef, TermStates> known = shared == null ? null
            : shared.byField.computeIfAbsent(st.field(), f -> new ConcurrentHashMap<>());
        List<BytesRef> wanted = new ArrayList<>();
        for (String term : st.terms()) {
            BytesRef b = new BytesRef(term);
            if (looked.containsKey(b)) {
                continue;
            }
            TermStates done = known == null ? null : known.get(b);
            if (done != null) {
                looked.put(b, done);
            } else {
                looked.put(b, new TermStates(top));
                wanted.add(b);
            }
        }
        if (wanted.isEmpty()) {
            return;
        }
        wanted.sort(null);  // in the terms dictionary's order
        for (LeafReaderContext leaf : top.leaves()) {
            Terms terms = leaf.reader().terms(st.field());
            if (terms == null) {
                continue;
            }
            TermsEnum it = terms.iterator();
            for (BytesRef b : wanted) {
                if (it.seekExact(b)) {
                    looked.get(b).register(it.termState(), leaf.ord, it.docFreq(), it.totalTermFreq());
                }
            }
        }
        if (known != null) {
            for (BytesRef b : wanted) {
                if (shared.size.get() >= MAX_SHARED_TERMS) {
                    break;
                }
                if (known.putIfAbsent(b, looked.get(b)) == null) {
                    shared.size.incrementAndGet();
                }
            }
        }
    }

    /** The tokens of {@code text} as {@code field}'s index analyzer makes them, at the positions
     * the index would give them, ordered by position and then by term. */
    private static List<Token> analyse(FetchContext context, String field, String text) throws IOException {
        boolean mapped = context.getQueryShardContext().fieldMapper(field) != null; //@opensearch
        boolean mapped = context.getSearchExecutionContext().isFieldMapped(field); //@elasticsearch
        if (!mapped) {
            throw new IllegalArgumentException("[" + FeaturesExt.NAME + "] analyze.fields names [" + field
                + "], which is not a field of the index");
        }
        Analyzer analyzer = context.mapperService().indexAnalyzer(); //@opensearch
        Analyzer analyzer = context.getSearchExecutionContext().getIndexAnalyzer(f -> { //@elasticsearch
            throw new IllegalArgumentException("[" + FeaturesExt.NAME + "] field [" + f + "] is not analysed"); //@elasticsearch
        }); //@elasticsearch
        List<Token> out = new ArrayList<>();
        try (TokenStream ts = analyzer.tokenStream(field, text)) {
            CharTermAttribute term = ts.addAttribute(CharTermAttribute.class);
            PositionIncrementAttribute increment = ts.addAttribute(PositionIncrementAttribute.class);
            ts.reset();
            int position = -1;  // as the index counts them: the first token is at 0
            while (ts.incrementToken()) {
                position += increment.getPositionIncrement();
                out.add(new Token(position, new BytesRef(term)));
            }
            ts.end();
        }
        out.sort(Comparator.comparingInt(Token::position).thenComparing(Token::term));
        return out;
    }

    private static BytesRef[] bytes(List<String> terms) {
        BytesRef[] out = new BytesRef[terms.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = new BytesRef(terms.get(i));
        }
        return out;
    }

    /** [doc_count, sum_ttf, df...] of one field as the searcher reports them. */
    private static List<Long> statistics(IndexSearcher searcher, FeaturesExt.Stats s,
                                         Map<BytesRef, TermStates> looked) throws IOException {
        List<Long> out = new ArrayList<>(s.terms().size() + 2);
        CollectionStatistics cs = searcher.collectionStatistics(s.field());
        out.add(cs == null ? 0L : cs.docCount());
        out.add(cs == null ? 0L : cs.sumTotalTermFreq());
        for (String term : s.terms()) {
            Term t = new Term(s.field(), term);
            TermStates local = looked.get(t.bytes());  // built for every term asked for
            long df = 0;
            try {
                TermStatistics ts = searcher.termStatistics(t, local.docFreq(), local.totalTermFreq());
                df = ts == null ? 0L : ts.docFreq();
            } catch (IllegalArgumentException absent) {
                df = 0L;  // no statistics: the term occurs in no document the searcher knows of
            }
            out.add(df);
        }
        return out;
    }
}
