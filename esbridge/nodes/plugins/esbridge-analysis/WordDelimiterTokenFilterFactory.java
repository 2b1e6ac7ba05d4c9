package org.esbridge.analysis;

import org.apache.lucene.analysis.CharArraySet;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.miscellaneous.WordDelimiterFilter;
import org.apache.lucene.analysis.miscellaneous.WordDelimiterIterator;
import org.elasticsearch.plugin.Inject;
import org.elasticsearch.plugin.NamedComponent;
import org.elasticsearch.plugin.analysis.TokenFilterFactory;

/** analysis-common {@code word_delimiter} (the deprecated non-graph variant). */
@NamedComponent("word_delimiter")
@SuppressWarnings("deprecation")
public class WordDelimiterTokenFilterFactory implements TokenFilterFactory {
    private final int flags;
    private final CharArraySet protectedWords;

    @Inject
    public WordDelimiterTokenFilterFactory(WordDelimiterSettings settings) {
        this.flags = WordDelimiterFlags.flags(settings);
        this.protectedWords = WordDelimiterFlags.protectedWords(settings);
    }

    @Override
    public TokenStream create(TokenStream in) {
        return new WordDelimiterFilter(in, WordDelimiterIterator.DEFAULT_WORD_DELIM_TABLE, flags, protectedWords);
    }
}
