package org.esbridge.analysis;

import org.apache.lucene.analysis.CharArraySet;

import java.util.List;

import static org.apache.lucene.analysis.miscellaneous.WordDelimiterGraphFilter.*;

/** Turns {@link WordDelimiterSettings} into Lucene flags (kept out of the settings interface, which the server proxies). */
final class WordDelimiterFlags {
    private WordDelimiterFlags() {}

    /** The flag constants are identical in WordDelimiterFilter and WordDelimiterGraphFilter. */
    static int flags(WordDelimiterSettings s) {
        if (s.typeTable() != null && s.typeTable().isEmpty() == false) {
            throw new IllegalArgumentException("type_table is not supported by esbridge-analysis");
        }
        int f = 0;
        if (s.generateWordParts()) f |= GENERATE_WORD_PARTS;
        if (s.generateNumberParts()) f |= GENERATE_NUMBER_PARTS;
        if (s.catenateWords()) f |= CATENATE_WORDS;
        if (s.catenateNumbers()) f |= CATENATE_NUMBERS;
        if (s.catenateAll()) f |= CATENATE_ALL;
        if (s.splitOnCaseChange()) f |= SPLIT_ON_CASE_CHANGE;
        if (s.preserveOriginal()) f |= PRESERVE_ORIGINAL;
        if (s.splitOnNumerics()) f |= SPLIT_ON_NUMERICS;
        if (s.stemEnglishPossessive()) f |= STEM_ENGLISH_POSSESSIVE;
        if (s.ignoreKeywords()) f |= IGNORE_KEYWORDS;
        return f;
    }

    static CharArraySet protectedWords(WordDelimiterSettings s) {
        List<String> words = s.protectedWords();
        return words == null || words.isEmpty() ? null : new CharArraySet(words, false);
    }
}
