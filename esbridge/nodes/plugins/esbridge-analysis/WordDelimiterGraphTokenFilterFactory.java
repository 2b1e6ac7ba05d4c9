package org.esbridge.analysis;

import org.apache.lucene.analysis.CharArraySet;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.miscellaneous.WordDelimiterGraphFilter;
import org.apache.lucene.analysis.miscellaneous.WordDelimiterIterator;
import org.elasticsearch.plugin.Inject;
import org.elasticsearch.plugin.NamedComponent;
import org.elasticsearch.plugin.analysis.TokenFilterFactory;

/** analysis-common {@code word_delimiter_graph}. */
@NamedComponent("word_delimiter_graph")
public class WordDelimiterGraphTokenFilterFactory implements TokenFilterFactory {
    private final int flags;
    private final boolean adjustOffsets;
    private final CharArraySet protectedWords;

    @Inject
    public WordDelimiterGraphTokenFilterFactory(WordDelimiterSettings settings) {
        this.flags = WordDelimiterFlags.flags(settings);
        this.adjustOffsets = settings.adjustOffsets();
        this.protectedWords = WordDelimiterFlags.protectedWords(settings);
    }

    @Override
    public TokenStream create(TokenStream in) {
        return new WordDelimiterGraphFilter(in, adjustOffsets, WordDelimiterIterator.DEFAULT_WORD_DELIM_TABLE, flags, protectedWords);
    }
}
