package org.esbridge.features;

import java.util.List;

/**
 * The most one request's {@code esbridge_features} extension may ask for, each a node setting
 * ({@link FeaturesPlugin#getSettings}): without them a request of a million terms held a search
 * thread for seconds. A request beyond one is refused (400) with a message naming the setting and
 * the value the request gave.
 *
 * <ul>
 * <li>{@code esbridge.features.max_terms}: the terms of the groups and of the statistics together
 * (with {@code analyze}, the text's distinct terms in each field analysed and in each field counted);
 * <li>{@code esbridge.features.max_fields}: the groups, the statistics' fields and the fields
 * analysed together;
 * <li>{@code esbridge.features.max_analyze_chars}: the characters analysed, the text's length (in
 * UTF-16 code units) times the number of fields it is analysed in.
 * </ul>
 *
 * Nothing here depends on the engine (the plugin's unit tests check it on its own).
 */
record FeaturesLimits(int maxTerms, int maxFields, int maxAnalyzeChars) {
    static final String MAX_TERMS = "esbridge.features.max_terms";
    static final String MAX_FIELDS = "esbridge.features.max_fields";
    static final String MAX_ANALYZE_CHARS = "esbridge.features.max_analyze_chars";

    /** The defaults: far above what esbridge sends (a query's distinct terms in each channel asked
     * for, twice; its combined field's four channels, or four per text field for BM25F; texts of at
     * most 1,000 characters analysed in at most four fields). */
    static final FeaturesLimits DEFAULTS = new FeaturesLimits(100_000, 1_000, 100_000);

    FeaturesLimits {
        if (maxTerms < 1 || maxFields < 1 || maxAnalyzeChars < 1) {
            throw new IllegalArgumentException("[" + FeaturesExt.NAME + "] limits must be at least 1");
        }
    }

    /** Refuses a request that names more fields or terms, or has more characters analysed, than allowed. */
    void check(List<FeaturesExt.Group> groups, List<FeaturesExt.Stats> stats, FeaturesExt.Analyze analyze) {
        long fields = (long) groups.size() + stats.size() + (analyze == null ? 0 : analyze.fields().size());
        if (fields > maxFields) {
            throw new IllegalArgumentException("[" + FeaturesExt.NAME + "] names " + fields
                + " fields (groups, stats and analyze.fields together), more than the limit [" + MAX_FIELDS
                + "] of " + maxFields);
        }
        long terms = 0;
        for (FeaturesExt.Group g : groups) {
            terms += g.terms().size();
        }
        for (FeaturesExt.Stats s : stats) {
            terms += s.terms().size();
        }
        checkTerms(terms, "asks for");
        if (analyze != null) {
            long chars = (long) analyze.text().length() * analyze.fields().size();
            if (chars > maxAnalyzeChars) {
                throw new IllegalArgumentException("[" + FeaturesExt.NAME + "] analyze asks for " + chars
                    + " characters to be analysed (a text of " + analyze.text().length() + " characters in "
                    + analyze.fields().size() + " field(s)), more than the limit [" + MAX_ANALYZE_CHARS + "] of "
                    + maxAnalyzeChars);
            }
        }
    }

    /** Refuses {@code terms} terms (groups and statistics together) beyond the limit; {@code how} says
     * where they come from ("asks for", "analyze gives"). */
    void checkTerms(long terms, String how) {
        if (terms > maxTerms) {
            throw new IllegalArgumentException("[" + FeaturesExt.NAME + "] " + how + " " + terms
                + " terms (groups and stats together), more than the limit [" + MAX_TERMS + "] of " + maxTerms);
        }
    }
}
