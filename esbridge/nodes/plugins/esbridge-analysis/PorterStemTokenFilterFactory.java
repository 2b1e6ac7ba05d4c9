package org.esbridge.analysis;

import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.en.PorterStemFilter;
import org.elasticsearch.plugin.NamedComponent;
import org.elasticsearch.plugin.analysis.TokenFilterFactory;

/** analysis-common {@code porter_stem}. */
@NamedComponent("porter_stem")
public class PorterStemTokenFilterFactory implements TokenFilterFactory {
    @Override
    public TokenStream create(TokenStream in) {
        return new PorterStemFilter(in);
    }
}
