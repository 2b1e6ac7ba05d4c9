package org.esbridge.features;

import org.apache.lucene.index.FieldInvertState;
import org.apache.lucene.index.IndexOptions;
import org.apache.lucene.search.similarities.BM25Similarity;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Unit tests of the plugin's logic that needs no running engine: the parsing of the extension, its
 * limits, the packing of a hit's features and the norms of {@code esbridge_bm25}. Compiled with the
 * plugin's sources against an engine's jars and run with a plain {@code main} (no test framework):
 * {@code python -m esbridge.nodes.check_plugin --check}. Prints one line a test; exits 1 at the
 * first failure.
 */
public final class FeaturesPluginTest {
    private static final FeaturesLimits SMALL = new FeaturesLimits(10, 3, 50);
    private static int run;

    private FeaturesPluginTest() {
    }

    public static void main(String[] args) {
        test("a request within the limits is parsed", FeaturesPluginTest::withinLimits);
        test("null, a list or a scalar is refused, naming the shape", FeaturesPluginTest::notAnObject);
        test("terms beyond max_terms are refused, naming the limit and the count", FeaturesPluginTest::tooManyTerms);
        test("fields beyond max_fields are refused, naming the limit and the count", FeaturesPluginTest::tooManyFields);
        test("analysed characters beyond max_analyze_chars are refused", FeaturesPluginTest::textTooLong);
        test("the terms an analysis gives are counted against max_terms", FeaturesPluginTest::analysedTerms);
        test("the defaults are far above what esbridge sends", FeaturesPluginTest::defaults);
        test("limits below 1 are refused", FeaturesPluginTest::limitsBelowOne);
        test("malformed extensions are refused as before", FeaturesPluginTest::malformed);
        test("features pack as 16-bit integers where all fit, else 32-bit", FeaturesPluginTest::packing);
        test("the esbridge_bm25 norm keeps BM25's byte, the length and distinct terms", FeaturesPluginTest::norms);
        System.out.println(run + " tests passed");
    }

    private interface Body {
        void run() throws Exception;
    }

    private static void test(String name, Body body) {
        try {
            body.run();
        } catch (Throwable e) {
            System.out.println("FAILED: " + name);
            e.printStackTrace(System.out);
            System.exit(1);
        }
        run++;
        System.out.println("ok: " + name);
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    /** The message of the IllegalArgumentException {@code body} throws, which must contain each of {@code parts}. */
    private static void refused(Body body, String... parts) throws Exception {
        String message = null;
        try {
            body.run();
        } catch (IllegalArgumentException e) {
            message = e.getMessage();
        }
        check(message != null, "not refused; expected a message with " + List.of(parts));
        for (String part : parts) {
            check(message.contains(part), "message " + message + " lacks " + part);
        }
    }

    private static List<String> terms(int n) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add("t" + i);
        }
        return out;
    }

    private static Map<String, Object> group(String field, List<String> terms) {
        return map("fields", List.of(field), "terms", terms);
    }

    private static Map<String, Object> map(Object... kv) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            out.put((String) kv[i], kv[i + 1]);
        }
        return out;
    }

    private static void withinLimits() {
        FeaturesExt ext = FeaturesExt.of(map(
            "groups", List.of(group("a", terms(3)), group("b", terms(2))),
            "stats", List.of(map("field", "a", "terms", terms(5))), "tag", "x"), SMALL);  // 10 terms, 3 fields
        check(ext.groups().size() == 2 && ext.stats().size() == 1 && ext.tag().equals("x"), "parsed " + ext);
        FeaturesExt analysing = FeaturesExt.of(map("analyze", map("text", "a".repeat(25), "fields", List.of("a", "b"))),
            SMALL);  // 50 characters analysed
        check(analysing.analyze().count().equals(List.of("a", "b")), "count defaults to fields");
        check(FeaturesExt.of(Map.of(), SMALL).groups().isEmpty(), "an empty object asks for nothing");
    }

    private static void notAnObject() throws Exception {
        refused(() -> FeaturesExt.of(null, SMALL), "[esbridge_features] must be an object", "\"groups\"", "got null");
        refused(() -> FeaturesExt.of(List.of(Map.of()), SMALL), "must be an object", "got a list");
        refused(() -> FeaturesExt.of("groups", SMALL), "must be an object", "got a string");
        refused(() -> FeaturesExt.of(3, SMALL), "must be an object", "got a number");
        refused(() -> FeaturesExt.of(true, SMALL), "must be an object", "got a boolean");
    }

    private static void tooManyTerms() throws Exception {
        refused(() -> FeaturesExt.of(map("groups", List.of(group("a", terms(11)))), SMALL),
            "esbridge.features.max_terms", "asks for 11 terms", "of 10");
        // groups and stats add up
        refused(() -> FeaturesExt.of(map("groups", List.of(group("a", terms(6))),
            "stats", List.of(map("field", "a", "terms", terms(5)))), SMALL), "esbridge.features.max_terms", "11 terms");
    }

    private static void tooManyFields() throws Exception {
        List<Object> groups = new ArrayList<>(Collections.nCopies(2, group("a", List.of())));
        refused(() -> FeaturesExt.of(map("groups", groups,
            "stats", List.of(map("field", "a"), map("field", "b"))), SMALL), "esbridge.features.max_fields",
            "names 4 fields", "of 3");
        refused(() -> FeaturesExt.of(map("analyze", map("text", "x", "fields", List.of("a", "b", "c", "d"))), SMALL),
            "esbridge.features.max_fields", "names 4 fields");
    }

    private static void textTooLong() throws Exception {
        refused(() -> FeaturesExt.of(map("analyze", map("text", "a".repeat(51), "fields", List.of("a"))), SMALL),
            "esbridge.features.max_analyze_chars", "51 characters", "of 50");
        // the text's length times the fields it is analysed in
        refused(() -> FeaturesExt.of(map("analyze", map("text", "a".repeat(20), "fields", List.of("a", "b", "c"))),
            SMALL), "esbridge.features.max_analyze_chars", "60 characters", "a text of 20 characters in 3 field(s)");
    }

    private static void analysedTerms() throws Exception {
        SMALL.checkTerms(10, "analyze gives");
        refused(() -> SMALL.checkTerms(11, "analyze gives"), "analyze gives 11 terms", "esbridge.features.max_terms");
    }

    private static void defaults() {
        FeaturesLimits d = FeaturesLimits.DEFAULTS;
        // esbridge analyses at most 1,000 characters in at most 4 channels
        check(d.maxAnalyzeChars() >= 10 * 4 * 1_000, "max_analyze_chars " + d.maxAnalyzeChars());
        // a query of 1,000 distinct terms in 4 channels of 4 fields, as groups and as statistics
        check(d.maxTerms() >= 2 * 4 * 4 * 1_000, "max_terms " + d.maxTerms());
        // 4 channels of 100 text fields, groups and statistics
        check(d.maxFields() >= 2 * 4 * 100, "max_fields " + d.maxFields());
    }

    private static void limitsBelowOne() throws Exception {
        refused(() -> new FeaturesLimits(0, 1, 1), "at least 1");
        refused(() -> new FeaturesLimits(1, 1, -5), "at least 1");
    }

    private static void malformed() throws Exception {
        refused(() -> FeaturesExt.of(map("group", List.of()), SMALL), "has no parameter [group]");
        refused(() -> FeaturesExt.of(map("groups", List.of(map("fields", List.of("a", "b")))), SMALL),
            "exactly one field");
        refused(() -> FeaturesExt.of(map("groups", List.of(group("a", List.of())),
            "analyze", map("text", "x", "fields", List.of("a"))), SMALL), "not both");
        refused(() -> FeaturesExt.of(map("stats", List.of(map("field", "a", "terms", List.of(3)))), SMALL),
            "stats.terms must be a list of strings");
        refused(() -> FeaturesExt.of(map("tag", 3), SMALL), "tag must be a string");
    }

    private static void packing() {
        byte[] small = FeaturesFetchSubPhase.pack(new int[] {3, -1, Short.MAX_VALUE});
        check(small.length == 6, "16-bit: " + small.length + " bytes");
        ByteBuffer in = ByteBuffer.wrap(small).order(ByteOrder.LITTLE_ENDIAN);
        check(in.getShort() == 3 && in.getShort() == -1 && in.getShort() == Short.MAX_VALUE, "16-bit values");
        byte[] wide = FeaturesFetchSubPhase.pack(new int[] {3, Short.MAX_VALUE + 1});
        check(wide.length == 8, "32-bit: " + wide.length + " bytes");
        in = ByteBuffer.wrap(wide).order(ByteOrder.LITTLE_ENDIAN);
        check(in.getInt() == 3 && in.getInt() == Short.MAX_VALUE + 1, "32-bit values");
        check(FeaturesFetchSubPhase.pack(new int[0]).length == 0, "nothing packs to nothing");
    }

    private static void norms() {
        BM25Similarity bm25 = new BM25Similarity();
        ExactLengthSimilarity exact = new ExactLengthSimilarity(bm25);
        // 1,000 tokens (none overlapping), 321 distinct
        FieldInvertState state = new FieldInvertState(9, "f", IndexOptions.DOCS_AND_FREQS, 1_000, 1_000, 0, 0, 7, 321);
        long norm = exact.computeNorm(state);
        check(ExactLengthSimilarity.length(norm) == 1_000, "length " + ExactLengthSimilarity.length(norm));
        check(ExactLengthSimilarity.distinct(norm) == 321, "distinct " + ExactLengthSimilarity.distinct(norm));
        check((norm >>> 56) == (bm25.computeNorm(state) & 0xFF), "BM25's byte");
        FieldInvertState huge = new FieldInvertState(9, "f", IndexOptions.DOCS_AND_FREQS, 0,
            (int) ExactLengthSimilarity.MASK + 1, 0, 0, 1, 1);
        try {
            exact.computeNorm(huge);
            check(false, "a field beyond 28 bits of tokens was not refused");
        } catch (IllegalArgumentException expected) {
            check(expected.getMessage().contains("tokens"), expected.getMessage());
        }
    }
}
