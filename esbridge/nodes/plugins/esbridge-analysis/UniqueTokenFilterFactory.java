package org.esbridge.analysis;

import org.apache.lucene.analysis.CharArraySet;
import org.apache.lucene.analysis.TokenFilter;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.apache.lucene.analysis.tokenattributes.PositionIncrementAttribute;
import org.elasticsearch.plugin.Inject;
import org.elasticsearch.plugin.NamedComponent;
import org.elasticsearch.plugin.analysis.TokenFilterFactory;
import org.elasticsearch.plugin.settings.AnalysisSettings;
import org.elasticsearch.plugin.settings.BooleanSetting;

import java.io.IOException;

/** analysis-common {@code unique}: drops repeated terms (only at the same position if only_on_same_position). */
@NamedComponent("unique")
public class UniqueTokenFilterFactory implements TokenFilterFactory {
    @AnalysisSettings
    public interface Settings {
        @BooleanSetting(path = "only_on_same_position", defaultValue = false) boolean onlyOnSamePosition();
    }

    private final boolean onlyOnSamePosition;

    @Inject
    public UniqueTokenFilterFactory(Settings settings) {
        this.onlyOnSamePosition = settings.onlyOnSamePosition();
    }

    @Override
    public TokenStream create(TokenStream in) {
        return new Unique(in, onlyOnSamePosition);
    }

    static final class Unique extends TokenFilter {
        private final CharTermAttribute termAtt = addAttribute(CharTermAttribute.class);
        private final PositionIncrementAttribute posIncAtt = addAttribute(PositionIncrementAttribute.class);
        private final CharArraySet seen = new CharArraySet(8, false);
        private final boolean onlyOnSamePosition;

        Unique(TokenStream in, boolean onlyOnSamePosition) {
            super(in);
            this.onlyOnSamePosition = onlyOnSamePosition;
        }

        @Override
        public boolean incrementToken() throws IOException {
            while (input.incrementToken()) {
                final char[] term = termAtt.buffer();
                final int len = termAtt.length();
                boolean duplicate;
                if (onlyOnSamePosition) {
                    if (posIncAtt.getPositionIncrement() > 0) seen.clear();
                    duplicate = seen.contains(term, 0, len);
                } else {
                    duplicate = seen.contains(term, 0, len);
                }
                char[] copy = new char[len];
                System.arraycopy(term, 0, copy, 0, len);
                seen.add(copy);
                if (duplicate == false) return true;
            }
            return false;
        }

        @Override
        public void reset() throws IOException {
            super.reset();
            seen.clear();
        }
    }
}
